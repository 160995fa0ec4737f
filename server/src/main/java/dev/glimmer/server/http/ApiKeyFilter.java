package dev.glimmer.server.http;

import io.helidon.http.HeaderNames;
import io.helidon.webserver.http.Filter;
import io.helidon.webserver.http.FilterChain;
import io.helidon.webserver.http.RoutingRequest;
import io.helidon.webserver.http.RoutingResponse;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;

/**
 * Requires {@code Authorization: Bearer <key>} on every route except {@code /health} (load balancers
 * probe it without credentials), CORS preflights (browsers never send credentials with them) and the
 * web chat's own files: a browser cannot send a key with the page request, and the page holds no
 * data; it asks the user for the key and sends it with every API call.
 */
public final class ApiKeyFilter implements Filter {
    private final byte[] expected;

    public ApiKeyFilter(String apiKey) {
        this.expected = apiKey.getBytes(StandardCharsets.UTF_8);
    }

    @Override
    public void filter(FilterChain chain, RoutingRequest req, RoutingResponse res) {
        String path = req.path().path();
        String method = req.prologue().method().text();
        if (path.equals("/health") || method.equals("OPTIONS") || isWebChatFile(method, path)) {
            chain.proceed();
            return;
        }
        String header = req.headers().first(HeaderNames.AUTHORIZATION).orElse(null);
        if (header == null) {
            ErrorResponses.send(res, ApiException.unauthorized(
                    "this server needs an API key: send 'Authorization: Bearer <key>'"));
            return;
        }
        if (!header.regionMatches(true, 0, "Bearer ", 0, 7)) {
            ErrorResponses.send(res, ApiException.unauthorized("the Authorization header must be 'Bearer <key>'"));
            return;
        }
        byte[] given = header.substring(7).strip().getBytes(StandardCharsets.UTF_8);
        // Constant-time comparison so that response timing says nothing about the key.
        if (!MessageDigest.isEqual(given, expected)) {
            ErrorResponses.send(res, ApiException.unauthorized("the API key is not valid"));
            return;
        }
        chain.proceed();
    }

    /** The page, its scripts and styles at the root, and the libraries under /webjars (WebChatRoutes). */
    static boolean isWebChatFile(String method, String path) {
        if (!method.equals("GET") && !method.equals("HEAD")) {
            return false;
        }
        if (path.equals("/") || path.startsWith("/webjars/")) {
            return !path.contains("..");
        }
        return path.lastIndexOf('/') == 0 && path.matches("/[\\w.-]+\\.(html|js|css|svg|ico|png)");
    }
}
