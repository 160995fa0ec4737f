package dev.glimmer.server.routes;

import dev.glimmer.server.inference.ModelHost;
import dev.glimmer.server.metrics.ServerMetrics;
import io.helidon.http.HeaderNames;
import io.helidon.webserver.http.HttpRules;
import io.helidon.webserver.http.HttpService;
import io.helidon.webserver.http.ServerRequest;
import io.helidon.webserver.http.ServerResponse;
import java.nio.charset.StandardCharsets;

/**
 * The probes and the metrics: {@code GET /health}, liveness (200 once the model is loaded, also while draining; 503
 * while loading, when loading failed or generation stopped), {@code GET /ready}, readiness (200 while requests are
 * taken; 503 while loading, draining, or after a failure), and {@code GET /metrics} (Prometheus text).
 */
public record HealthRoutes(ModelHost host, ServerMetrics metrics) implements HttpService {

    @Override
    public void routing(HttpRules rules) {
        rules.get("/health", this::health).get("/ready", this::ready).get("/metrics", this::metrics);
    }

    private void health(ServerRequest req, ServerResponse res) {
        host.alive(); // else 503 saying why (loading, failed to load, stopped)
        status(res, host.draining() ? "draining" : "ok");
    }

    private void ready(ServerRequest req, ServerResponse res) {
        host.require(); // else 503 saying why (loading, draining, failed to load, stopped)
        status(res, "ok");
    }

    private static void status(ServerResponse res, String status) {
        res.header(HeaderNames.CONTENT_TYPE, "application/json");
        res.send(("{\"status\":\"" + status + "\"}").getBytes(StandardCharsets.UTF_8));
    }

    private void metrics(ServerRequest req, ServerResponse res) {
        res.header(HeaderNames.CONTENT_TYPE, ServerMetrics.CONTENT_TYPE);
        res.send(metrics.scrape().getBytes(StandardCharsets.UTF_8));
    }
}
