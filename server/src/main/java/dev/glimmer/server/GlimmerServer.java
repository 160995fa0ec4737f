package dev.glimmer.server;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.http.ApiException;
import dev.glimmer.server.http.ApiKeyFilter;
import dev.glimmer.server.http.CorsFilter;
import dev.glimmer.server.http.ErrorResponses;
import dev.glimmer.server.http.MetricsFilter;
import dev.glimmer.server.inference.ModelHost;
import dev.glimmer.server.metrics.ServerMetrics;
import dev.glimmer.server.routes.ChatCompletionRoutes;
import dev.glimmer.server.routes.CompletionRoutes;
import dev.glimmer.server.routes.HealthRoutes;
import dev.glimmer.server.routes.MessagesRoutes;
import dev.glimmer.server.routes.ModelRoutes;
import dev.glimmer.server.routes.ResponsesRoutes;
import dev.glimmer.server.routes.TokenizerRoutes;
import dev.glimmer.server.routes.WebChatRoutes;
import io.helidon.webserver.WebServer;
import io.helidon.webserver.http.HttpRouting;

import java.time.Duration;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The HTTP server: Helidon SE routing as plain functions, OpenAI error objects for every failure,
 * optional API key and CORS filters. Handlers run on Helidon's virtual threads; inference runs
 * elsewhere (the scheduler).
 */
public final class GlimmerServer implements AutoCloseable {
    private static final Logger LOG = Logger.getLogger(GlimmerServer.class.getName());

    private final WebServer webServer;

    private GlimmerServer(WebServer webServer) {
        this.webServer = webServer;
    }

    /** Binds {@code config.host():config.port()} (port 0 picks a free one) and starts serving. */
    public static GlimmerServer start(ServerConfig config, ModelHost host, ServerMetrics metrics) {
        HttpRouting.Builder routing = HttpRouting.builder();
        routing.addFilter(new MetricsFilter(metrics));
        if (config.corsEnabled()) {
            routing.addFilter(new CorsFilter(config.corsOrigins()));
        }
        config.apiKey().ifPresent(key -> routing.addFilter(new ApiKeyFilter(key)));
        routing.register(new HealthRoutes(host, metrics));
        routing.register(new ModelRoutes(host));
        routing.register(new ChatCompletionRoutes(host, config));
        routing.register(new CompletionRoutes(host, config));
        routing.register(new ResponsesRoutes(host, config));
        routing.register(new MessagesRoutes(host, config));
        routing.register(new TokenizerRoutes(host, config));
        WebChatRoutes.register(routing);
        routing.any((req, res) -> {
            throw ApiException.notFound("no route " + req.prologue().method().text() + " " + req.path().path()
                    + " (see README.md: API)", null, "not_found");
        });
        routing.error(ApiException.class, (req, res, e) -> ErrorResponses.send(req, res, e));
        routing.error(InvalidInputException.class,
                (req, res, e) -> ErrorResponses.send(req, res, ApiException.badRequest(e.getMessage(), null)));
        routing.error(Exception.class, (req, res, e) -> {
            LOG.log(Level.SEVERE, "internal error on " + req.path().path(), e);
            ErrorResponses.send(req, res, ApiException.internal("internal error: " + e));
        });
        WebServer server = WebServer.builder()
                .host(config.host())
                .port(config.port())
                .shutdownHook(false)
                .shutdownGracePeriod(Duration.ofSeconds(5))
                .routing(routing)
                .build()
                .start();
        return new GlimmerServer(server);
    }

    public int port() {
        return webServer.port();
    }

    @Override
    public void close() {
        webServer.stop();
    }
}
