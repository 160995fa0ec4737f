package dev.glimmer.server;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.http.ApiException;
import dev.glimmer.server.http.ApiKeyFilter;
import dev.glimmer.server.http.CorsFilter;
import dev.glimmer.server.http.ErrorResponses;
import dev.glimmer.server.http.HostFilter;
import dev.glimmer.server.http.JsonBodyFilter;
import dev.glimmer.server.http.MetricsFilter;
import dev.glimmer.server.inference.ModelHost;
import dev.glimmer.server.inference.UnavailableException;
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
import java.io.IOException;
import java.net.BindException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The HTTP server: Helidon SE routing as plain functions, OpenAI error objects for every failure,
 * filters for the Host check, CORS, API keys and JSON bodies. Handlers run on Helidon's virtual threads; inference runs
 * elsewhere (the scheduler).
 */
public final class GlimmerServer implements AutoCloseable {
    private static final Logger LOG = Logger.getLogger(GlimmerServer.class.getName());

    /** Where the OpenAI routes live; each also answers without it. */
    private static final String API_PREFIX = "/v1";
    /** The request context's note of a path that was tried again under {@link #API_PREFIX}. */
    private static final String REQUESTED_PATH = "glimmer.requested-path";

    private final WebServer webServer;

    private GlimmerServer(WebServer webServer) {
        this.webServer = webServer;
    }

    /**
     * Binds {@code config.host():config.port()} (port 0 picks a free one) and starts serving.
     *
     * @throws InvalidInputException when the address cannot be bound (the port is taken, the host is not this machine's)
     */
    public static GlimmerServer start(ServerConfig config, ModelHost host, ServerMetrics metrics) {
        checkBindable(config.host(), config.port());
        HttpRouting.Builder routing = HttpRouting.builder();
        // In this order: every request counted; a foreign Host refused before anything else runs; CORS headers on
        // every answer the page may read, errors included; the key; then the body's type.
        routing.addFilter(new MetricsFilter(metrics));
        HostFilter.forServer(config.host(), config.allowedHosts()).ifPresent(routing::addFilter);
        routing.addFilter(new CorsFilter(config.corsOrigins()));
        if (!config.apiKeys().isEmpty()) {
            routing.addFilter(new ApiKeyFilter(config.apiKeys()));
        }
        routing.addFilter(new JsonBodyFilter());
        routing.register(new HealthRoutes(host, metrics));
        routing.register(new ModelRoutes(host));
        routing.register(new ChatCompletionRoutes(host, config));
        routing.register(new CompletionRoutes(host, config));
        routing.register(new ResponsesRoutes(host, config));
        routing.register(new MessagesRoutes(host, config));
        routing.register(new TokenizerRoutes(host, config));
        WebChatRoutes.register(routing);
        routing.any((req, res) -> {
            String path = req.path().path();
            // Clients whose base URL lacks /v1 call /chat/completions, /models, ...: the /v1 routes answer them.
            if (!path.startsWith(API_PREFIX)) {
                req.context().register(REQUESTED_PATH, path);
                res.reroute(API_PREFIX + path);
                return;
            }
            String requested = req.context().get(REQUESTED_PATH, String.class).orElse(path);
            throw ApiException.notFound(
                    "no route " + req.prologue().method().text() + " " + requested + " (see README.md: API)",
                    null,
                    "not_found");
        });
        routing.error(ApiException.class, (req, res, e) -> ErrorResponses.send(req, res, e));
        routing.error(
                UnavailableException.class,
                (req, res, e) ->
                        ErrorResponses.send(req, res, ApiException.unavailable(e.getMessage(), e.retryAfterSeconds())));
        routing.error(
                InvalidInputException.class,
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
        if (!server.isRunning() || server.port() < 0) {
            // Taken between the check and Helidon's bind: Helidon has logged why.
            server.stop();
            throw new InvalidInputException(cannotListen(config.host(), config.port(), "the address is in use"));
        }
        return new GlimmerServer(server);
    }

    /**
     * Binds the address once and lets it go, so that a taken port is one clear line rather than Helidon's
     * stack trace (it logs a failed bind and carries on with port -1). The socket allows address reuse as
     * Helidon's does, so a port a stopped server left in TIME_WAIT counts as free.
     */
    private static void checkBindable(String host, int port) {
        try (ServerSocket probe = new ServerSocket()) {
            probe.setReuseAddress(true);
            probe.bind(new InetSocketAddress(host, port));
        } catch (IOException e) {
            String why =
                    e instanceof BindException && String.valueOf(e.getMessage()).contains("in use")
                            ? "the port is already in use (another server?); choose another with --port"
                            : String.valueOf(e.getMessage());
            throw new InvalidInputException(cannotListen(host, port, why));
        }
    }

    private static String cannotListen(String host, int port, String why) {
        return "cannot listen on " + host + ":" + port + ": " + why;
    }

    public int port() {
        return webServer.port();
    }

    @Override
    public void close() {
        webServer.stop();
    }
}
