package dev.glimmer.server.http;

import io.helidon.http.HeaderName;
import io.helidon.http.HeaderNames;
import io.helidon.webserver.http.Filter;
import io.helidon.webserver.http.FilterChain;
import io.helidon.webserver.http.RoutingRequest;
import io.helidon.webserver.http.RoutingResponse;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;

/**
 * Requires {@code Authorization: Bearer <key>} (or Anthropic's {@code x-api-key: <key>}) on every route except {@code /health} and {@code /ready} (load balancers
 * * probe them without credentials), CORS preflights (browsers never send credentials with them) and the
 * web chat's own files: a browser cannot send a key with the page request, and the page holds no
 * data; it asks the user for the key and sends it with every API call.
 */
public final class ApiKeyFilter implements Filter {
    private static final HeaderName API_KEY = HeaderNames.create("x-api-key");

    private final byte[] expected;

    public ApiKeyFilter(String apiKey) {
        this.expected = apiKey.getBytes(StandardCharsets.UTF_8);
    }

    @Override
    public void filter(FilterChain chain, RoutingRequest req, RoutingResponse res) {
        String path = req.path().path();
        String method = req.prologue().method().text();
        if (path.equals("/health") || path.equals("/ready") || method.equals("OPTIONS") || isWebChatFile(method, path)) {
            chain.proceed();
            return;
        }
        String authorization = req.headers().first(HeaderNames.AUTHORIZATION).orElse(null);
        if (authorization != null && !authorization.regionMatches(true, 0, "Bearer ", 0, 7)) {
            ErrorResponses.send(req, res, ApiException.unauthorized("the Authorization header must be 'Bearer <key>'"));
            return;
        }
        // OpenAI clients send the key as a bearer token, Anthropic clients in x-api-key.
        String given = authorization != null ? authorization.substring(7).strip()
                : req.headers().first(API_KEY).map(String::strip).orElse(null);
        if (given == null) {
            ErrorResponses.send(req, res, ApiException.unauthorized(
                    "this server needs an API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'"));
            return;
        }
        // Constant-time comparison so that response timing says nothing about the key.
        if (!MessageDigest.isEqual(given.getBytes(StandardCharsets.UTF_8), expected)) {
            ErrorResponses.send(req, res, ApiException.unauthorized("the API key is not valid"));
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
