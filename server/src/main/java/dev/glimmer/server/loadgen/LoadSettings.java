package dev.glimmer.server.loadgen;

import dev.glimmer.engine.InvalidInputException;
import java.net.URI;
import java.net.URISyntaxException;
import java.time.Duration;
import java.util.Optional;

/**
 * What a load test runs: {@code requests} streaming {@code /v1/completions} requests, {@code concurrency} of
 * them in flight at once, against the OpenAI-compatible server at {@code baseUrl}.
 *
 * @param baseUrl      the server, without {@code /v1} (e.g. {@code http://127.0.0.1:8080}); see {@link #parseUrl}
 * @param model        the model name sent; empty: the first of {@code GET /v1/models}, else {@code "default"}
 * @param apiKey       sent as {@code Authorization: Bearer}; empty: no such header
 * @param concurrency  requests in flight at once
 * @param requests     requests measured (the warm-up request is not one of them)
 * @param promptTokens about how many tokens each prompt has
 * @param maxTokens    the tokens each request asks for (with {@code ignore_eos}, the tokens each one gets)
 * @param timeout      the longest the server may stay silent (before its answer starts, or between two
 *                     lines of it) before the request counts as failed
 * @param seed         makes the prompts' text
 * @param sharedPrefix of each prompt's tokens, about how many every prompt starts with (the same text: an agent's
 *                     system prompt); 0: every prompt its own from the first word
 */
public record LoadSettings(
        URI baseUrl,
        Optional<String> model,
        Optional<String> apiKey,
        int concurrency,
        int requests,
        int promptTokens,
        int maxTokens,
        Duration timeout,
        long seed,
        int sharedPrefix) {

    public LoadSettings {
        check(concurrency >= 1, "--concurrency must be at least 1, got " + concurrency);
        check(requests >= 1, "--requests must be at least 1, got " + requests);
        check(promptTokens >= 1, "--prompt-tokens must be at least 1, got " + promptTokens);
        check(
                sharedPrefix >= 0 && sharedPrefix < promptTokens,
                "--shared-prefix must be at least 0 and less than" + " --prompt-tokens (" + promptTokens + "), got "
                        + sharedPrefix);
        check(maxTokens >= 1, "--max-tokens must be at least 1, got " + maxTokens);
        check(
                !timeout.isNegative() && !timeout.isZero(),
                "--timeout must be positive, got " + timeout.toSeconds() + " s");
        check(
                apiKey.stream().allMatch(key -> key.chars().allMatch(c -> c > ' ' && c < 127)),
                "--api-key must be printable ASCII without spaces (it is sent in an HTTP header)");
    }

    /**
     * The server's address from what a user types: {@code http(s)://host[:port][/prefix]}, with or without a
     * trailing {@code /v1} (OpenAI clients' base URLs end with it; the routes are added here).
     */
    public static URI parseUrl(String text) {
        URI uri;
        try {
            uri = new URI(text.strip());
        } catch (URISyntaxException e) {
            throw new InvalidInputException("--url is not a URL: " + text);
        }
        String scheme = uri.getScheme();
        if (scheme == null || !(scheme.equals("http") || scheme.equals("https")) || uri.getHost() == null) {
            throw new InvalidInputException("--url must look like http://host:port, got '" + text + "'");
        }
        if (uri.getQuery() != null || uri.getFragment() != null) {
            throw new InvalidInputException(
                    "--url must be the server's address without ?query or #fragment, got '" + text + "'");
        }
        String path = uri.getPath() == null ? "" : uri.getPath();
        while (path.endsWith("/")) {
            path = path.substring(0, path.length() - 1);
        }
        if (path.endsWith("/v1")) {
            path = path.substring(0, path.length() - 3);
        }
        return URI.create(scheme + "://" + uri.getRawAuthority() + path);
    }

    /** {@code route} (e.g. {@code /v1/completions}) on the server. */
    URI resolve(String route) {
        return URI.create(baseUrl + route);
    }

    private static void check(boolean ok, String message) {
        if (!ok) {
            throw new InvalidInputException(message);
        }
    }
}
