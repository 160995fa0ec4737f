package dev.glimmer.server.http;

import io.helidon.http.HeaderNames;
import io.helidon.http.Status;
import io.helidon.webserver.http.Filter;
import io.helidon.webserver.http.FilterChain;
import io.helidon.webserver.http.RoutingRequest;
import io.helidon.webserver.http.RoutingResponse;

import java.util.List;

/**
 * CORS for the configured origins only ({@code *} allows any): adds
 * {@code Access-Control-Allow-Origin} to responses for an allowed {@code Origin} and answers
 * preflight {@code OPTIONS} requests itself, allowing the headers the preflight asks for. Installed only when origins are configured; otherwise
 * browsers on other origins get no CORS headers and cannot read responses.
 */
public final class CorsFilter implements Filter {
    private final List<String> origins;

    public CorsFilter(List<String> origins) {
        this.origins = List.copyOf(origins);
    }

    @Override
    public void filter(FilterChain chain, RoutingRequest req, RoutingResponse res) {
        String origin = req.headers().first(HeaderNames.ORIGIN).orElse(null);
        boolean allowed = origin != null && (origins.contains("*") || origins.contains(origin));
        if (allowed) {
            res.header(HeaderNames.ACCESS_CONTROL_ALLOW_ORIGIN, origins.contains("*") ? "*" : origin);
            res.header(HeaderNames.VARY, "Origin");
        }
        boolean preflight = req.prologue().method().text().equals("OPTIONS")
                && req.headers().contains(HeaderNames.ACCESS_CONTROL_REQUEST_METHOD);
        if (preflight && allowed) {
            res.header(HeaderNames.ACCESS_CONTROL_ALLOW_METHODS, "GET, POST, OPTIONS");
            // Whatever headers the page asks for (the OpenAI JS SDK sends its own x-stainless-* ones): the
            // origin is trusted, and the API key is checked on the request itself.
            res.header(HeaderNames.ACCESS_CONTROL_ALLOW_HEADERS,
                    req.headers().first(HeaderNames.ACCESS_CONTROL_REQUEST_HEADERS).orElse("Authorization, Content-Type"));
            res.header(HeaderNames.ACCESS_CONTROL_MAX_AGE, "600");
            res.status(Status.NO_CONTENT_204).send();
            return;
        }
        chain.proceed();
    }
}
