package dev.glimmer.server.routes;

import dev.glimmer.server.inference.ModelHost;
import dev.glimmer.server.metrics.ServerMetrics;
import io.helidon.http.HeaderNames;
import io.helidon.webserver.http.HttpRules;
import io.helidon.webserver.http.HttpService;
import io.helidon.webserver.http.ServerRequest;
import io.helidon.webserver.http.ServerResponse;

import java.nio.charset.StandardCharsets;

/** {@code GET /health} (200 when ready; 503 while loading, when loading failed or generation stopped) and {@code GET /metrics} (Prometheus text). */
public record HealthRoutes(ModelHost host, ServerMetrics metrics) implements HttpService {

    @Override
    public void routing(HttpRules rules) {
        rules.get("/health", this::health).get("/metrics", this::metrics);
    }

    private void health(ServerRequest req, ServerResponse res) {
        host.require(); // else 503 saying why (loading, failed to load, stopped)
        res.header(HeaderNames.CONTENT_TYPE, "application/json");
        res.send("{\"status\":\"ok\"}".getBytes(StandardCharsets.UTF_8));
    }

    private void metrics(ServerRequest req, ServerResponse res) {
        res.header(HeaderNames.CONTENT_TYPE, ServerMetrics.CONTENT_TYPE);
        res.send(metrics.scrape().getBytes(StandardCharsets.UTF_8));
    }
}
