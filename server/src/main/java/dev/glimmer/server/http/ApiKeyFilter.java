package dev.glimmer.server.http;

import io.helidon.http.HeaderName;
import io.helidon.http.HeaderNames;
import io.helidon.webserver.http.Filter;
import io.helidon.webserver.http.FilterChain;
import io.helidon.webserver.http.RoutingRequest;
import io.helidon.webserver.http.RoutingResponse;
import io.helidon.webserver.http.ServerRequest;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.List;

/**
 * Requires one of the configured keys as {@code Authorization: Bearer <key>} (or Anthropic's {@code x-api-key: <key>}) on every route except {@code /health} and {@code /ready} (load balancers
 * probe them without credentials), CORS preflights (browsers never send credentials with them) and the
 * web chat's own files: a browser cannot send a key with the page request, and the page holds no
 * data; it asks the user for the key and sends it with every API call.
 *
 * <p>Which key a request came with is its {@link #caller}: stored Responses are visible only to the key that created them.
 */
public final class ApiKeyFilter implements Filter {
    private static final HeaderName API_KEY = HeaderNames.create("x-api-key");
    /** The request context's note of the caller. */
    private static final String CALLER = "glimmer.caller";
    /** The caller of every request where no key is configured. */
    public static final String ANYONE = "";

    /** The SHA-256 digests of the keys: equal lengths, so that comparing them takes the same time whatever was sent. */
    private final List<byte[]> digests;

    public ApiKeyFilter(List<String> apiKeys) {
        if (apiKeys.isEmpty()) {
            throw new IllegalArgumentException("no API key");
        }
        this.digests = apiKeys.stream().map(ApiKeyFilter::sha256).toList();
    }

    /** Who sent {@code req}: "key 1", "key 2", ... in the configured order, or {@link #ANYONE} on a server without keys. */
    public static String caller(ServerRequest req) {
        return req.context().get(CALLER, String.class).orElse(ANYONE);
    }

    @Override
    public void filter(FilterChain chain, RoutingRequest req, RoutingResponse res) {
        String path = req.path().path();
        String method = req.prologue().method().text();
        if (path.equals("/health")
                || path.equals("/ready")
                || method.equals("OPTIONS")
                || isWebChatFile(method, path)) {
            chain.proceed();
            return;
        }
        String authorization = req.headers().first(HeaderNames.AUTHORIZATION).orElse(null);
        if (authorization != null && !authorization.regionMatches(true, 0, "Bearer ", 0, 7)) {
            ErrorResponses.send(req, res, ApiException.unauthorized("the Authorization header must be 'Bearer <key>'"));
            return;
        }
        // OpenAI clients send the key as a bearer token, Anthropic clients in x-api-key.
        String given = authorization != null
                ? authorization.substring(7).strip()
                : req.headers().first(API_KEY).map(String::strip).orElse(null);
        if (given == null) {
            ErrorResponses.send(
                    req,
                    res,
                    ApiException.unauthorized(
                            "this server needs an API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'"));
            return;
        }
        // Constant time: every key is compared, each comparison of two digests of one length takes the same time,
        // so the response's timing says nothing about how much of a key was right.
        byte[] digest = sha256(given);
        int match = -1;
        for (int i = 0; i < digests.size(); i++) {
            if (MessageDigest.isEqual(digest, digests.get(i))) {
                match = i;
            }
        }
        if (match < 0) {
            ErrorResponses.send(req, res, ApiException.unauthorized("the API key is not valid"));
            return;
        }
        req.context().register(CALLER, "key " + (match + 1));
        chain.proceed();
    }

    private static byte[] sha256(String key) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(key.getBytes(StandardCharsets.UTF_8));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every Java has SHA-256", e);
        }
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
