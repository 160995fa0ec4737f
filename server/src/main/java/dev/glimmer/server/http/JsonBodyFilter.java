package dev.glimmer.server.http;

import io.helidon.http.HeaderNames;
import io.helidon.webserver.http.Filter;
import io.helidon.webserver.http.FilterChain;
import io.helidon.webserver.http.RoutingRequest;
import io.helidon.webserver.http.RoutingResponse;
import java.util.Locale;

/**
 * Refuses a POST whose {@code Content-Type} is not {@code application/json} (parameters such as
 * {@code charset} allowed) with a 415. Every POST route takes a JSON body, and a browser sends a
 * cross-site POST without asking the server first (a CORS preflight) only when its type is
 * {@code text/plain}, a form or multipart: so no page on another site can start a generation behind the
 * user's back. The web chat, the official SDKs and {@code bench-serve} all send {@code application/json}.
 */
public final class JsonBodyFilter implements Filter {
    @Override
    public void filter(FilterChain chain, RoutingRequest req, RoutingResponse res) {
        if (!req.prologue().method().text().equals("POST")) {
            chain.proceed();
            return;
        }
        String type = req.headers().first(HeaderNames.CONTENT_TYPE).orElse(null);
        String mediaType = type == null ? "" : type.split(";", 2)[0].strip().toLowerCase(Locale.ROOT);
        if (mediaType.equals("application/json")) {
            chain.proceed();
            return;
        }
        ErrorResponses.send(
                req,
                res,
                ApiException.unsupportedMediaType(
                        "the body must be JSON sent with" + " 'Content-Type: application/json', got "
                                + (type == null ? "no Content-Type" : "'" + type.strip() + "'")));
    }
}
