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
 * probe it without credentials) and CORS preflights (browsers never send credentials with them).
 */
public final class ApiKeyFilter implements Filter {
    private final byte[] expected;

    public ApiKeyFilter(String apiKey) {
        this.expected = apiKey.getBytes(StandardCharsets.UTF_8);
    }

    @Override
    public void filter(FilterChain chain, RoutingRequest req, RoutingResponse res) {
        String path = req.path().path();
        if (path.equals("/health") || req.prologue().method().text().equals("OPTIONS")) {
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
}
