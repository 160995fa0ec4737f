package dev.glimmer.server.http;

import dev.glimmer.server.metrics.ServerMetrics;
import io.helidon.webserver.http.Filter;
import io.helidon.webserver.http.FilterChain;
import io.helidon.webserver.http.RoutingRequest;
import io.helidon.webserver.http.RoutingResponse;
import java.util.Set;

/**
 * Counts every request by route and status once its response is sent (errors and 401s included),
 * and the handlers that have not returned yet (none may be left behind when the clients are gone).
 */
public final class MetricsFilter implements Filter {
    private static final Set<String> ROUTES = Set.of(
            "/",
            "/health",
            "/ready",
            "/metrics",
            "/v1/models",
            "/v1/chat/completions",
            "/v1/completions",
            "/v1/responses",
            "/v1/messages",
            "/v1/messages/count_tokens",
            "/tokenize",
            "/detokenize",
            "/apply-template");

    private final ServerMetrics metrics;

    public MetricsFilter(ServerMetrics metrics) {
        this.metrics = metrics;
    }

    @Override
    public void filter(FilterChain chain, RoutingRequest req, RoutingResponse res) {
        String route = route(req.path().path());
        res.whenSent(() -> metrics.request(route, res.status().code()));
        metrics.handlers(+1);
        try {
            chain.proceed();
        } finally {
            metrics.handlers(-1);
        }
    }

    /** A bounded set of labels: the route pattern, or "other" for anything unknown. */
    static String route(String path) {
        if (ROUTES.contains(path)) {
            return path;
        }
        if (path.startsWith("/v1/models/")) {
            return "/v1/models/{id}";
        }
        return path.startsWith("/v1/responses/") ? "/v1/responses/{id}" : "other";
    }
}
