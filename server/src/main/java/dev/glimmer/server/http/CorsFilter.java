package dev.glimmer.server.http;

import io.helidon.http.HeaderNames;
import io.helidon.http.Status;
import io.helidon.webserver.http.Filter;
import io.helidon.webserver.http.FilterChain;
import io.helidon.webserver.http.RoutingRequest;
import io.helidon.webserver.http.RoutingResponse;
import java.net.URI;
import java.net.URISyntaxException;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * Which pages of other origins may call the server from a browser ({@code --cors}, a comma-separated
 * list): {@code local} (the default) allows pages served from {@code localhost}, {@code 127.0.0.1} or
 * {@code [::1]} on any port (a web app in development on port 3000, another local tool), an origin such as
 * {@code https://chat.example} allows exactly that one, {@code *} any, and {@code none} (or nothing) none.
 *
 * <p>An allowed origin gets itself back in {@code Access-Control-Allow-Origin} with credentials allowed
 * ({@code *} gets {@code *}, which browsers accept only without credentials), on every answer, errors
 * included, and its preflight {@code OPTIONS} is answered here: 204 with the methods and whatever headers
 * the page asks for (the OpenAI JS SDK sends its own {@code x-stainless-*}; the API key is checked on the
 * request itself). Any other origin's preflight is a 403, and its requests get no CORS headers, so the
 * browser neither sends a JSON request for it nor lets it read an answer. Pages of the server's own
 * origin (the web chat) need none of this.
 */
public final class CorsFilter implements Filter {
    /** The list entry that allows pages served from this machine. */
    public static final String LOCAL = "local";

    private static final String ANY = "*";
    private static final String NONE = "none";

    private final boolean local;
    private final boolean any;
    /** The origins named one by one, in lower case. */
    private final Set<String> origins;

    /** @param allowed the entries of {@code --cors} */
    public CorsFilter(List<String> allowed) {
        this.local = allowed.contains(LOCAL);
        this.any = allowed.contains(ANY);
        this.origins = Set.copyOf(allowed.stream()
                .filter(o -> !List.of(LOCAL, ANY, NONE).contains(o))
                .map(o -> o.toLowerCase(Locale.ROOT))
                .toList());
    }

    @Override
    public void filter(FilterChain chain, RoutingRequest req, RoutingResponse res) {
        String origin = req.headers().first(HeaderNames.ORIGIN).orElse(null);
        if (origin == null) {
            chain.proceed();
            return;
        }
        boolean preflight = req.prologue().method().text().equals("OPTIONS")
                && req.headers().contains(HeaderNames.ACCESS_CONTROL_REQUEST_METHOD);
        res.header(HeaderNames.VARY, "Origin");
        boolean named = origins.contains(origin.toLowerCase(Locale.ROOT)) || local && isLocal(origin);
        if (named) {
            res.header(HeaderNames.ACCESS_CONTROL_ALLOW_ORIGIN, origin);
            res.header(HeaderNames.ACCESS_CONTROL_ALLOW_CREDENTIALS, "true");
        } else if (any) {
            res.header(HeaderNames.ACCESS_CONTROL_ALLOW_ORIGIN, "*");
        } else {
            if (preflight) {
                ErrorResponses.send(
                        req,
                        res,
                        ApiException.forbidden(
                                "pages of the origin '" + origin + "' may not call this server (allow it with --cors)",
                                "origin_not_allowed"));
                return;
            }
            chain.proceed();
            return;
        }
        if (preflight) {
            res.header(HeaderNames.ACCESS_CONTROL_ALLOW_METHODS, "GET, POST, DELETE, OPTIONS");
            res.header(
                    HeaderNames.ACCESS_CONTROL_ALLOW_HEADERS,
                    req.headers()
                            .first(HeaderNames.ACCESS_CONTROL_REQUEST_HEADERS)
                            .orElse("Authorization, Content-Type"));
            res.header(HeaderNames.ACCESS_CONTROL_MAX_AGE, "600");
            res.status(Status.NO_CONTENT_204).send();
            return;
        }
        chain.proceed();
    }

    /** An http or https origin whose host is one of this machine's loopback names. */
    private static boolean isLocal(String origin) {
        try {
            URI uri = new URI(origin);
            String scheme = uri.getScheme() == null ? "" : uri.getScheme().toLowerCase(Locale.ROOT);
            return (scheme.equals("http") || scheme.equals("https"))
                    && uri.getHost() != null
                    && uri.getPath().isEmpty()
                    && HostNames.isLoopback(HostNames.name(uri.getHost()));
        } catch (URISyntaxException e) {
            return false;
        }
    }
}
