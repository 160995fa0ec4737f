package dev.glimmer.server;

import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.inference.ModelFacts;
import dev.glimmer.server.inference.ModelHost;
import dev.glimmer.server.inference.ServedModel;
import dev.glimmer.server.metrics.ServerMetrics;

import java.nio.file.Path;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * A running Glimmer server: starts listening at once (so {@code /health} can answer 503 while
 * loading), loads the model on a background thread, and shuts everything down in order.
 */
public final class GlimmerApp implements AutoCloseable {
    private static final Logger LOG = Logger.getLogger(GlimmerApp.class.getName());

    private final ServerConfig config;
    private final ServerMetrics metrics = new ServerMetrics();
    private final ModelHost host = new ModelHost();
    private final GlimmerServer server;
    private final Thread loader;

    private GlimmerApp(ServerConfig config) {
        this.config = config;
        this.server = GlimmerServer.start(config, host, metrics);
        LOG.info("listening on http://" + config.host() + ":" + server.port() + " (model loading)");
        this.loader = Thread.ofPlatform().name("glimmer-model-loader").start(this::load);
    }

    public static GlimmerApp start(ServerConfig config) {
        return new GlimmerApp(config);
    }

    private void load() {
        try {
            Path path = config.model().orElseThrow(() -> new IllegalStateException(
                    "no --model given and the demo model is not available in this version"));
            host.progress("opening " + path);
            GgufFile file = GgufFile.open(path);
            ServedModel model = new ServedModel(file, ModelFacts.of(file, config.ctx(), false));
            host.ready(model);
            LOG.info("model " + model.facts().id() + " ready");
        } catch (Exception e) {
            LOG.log(Level.SEVERE, "the model failed to load: " + e.getMessage());
            host.failed(e.getMessage());
        }
    }

    public int port() {
        return server.port();
    }

    public ModelHost host() {
        return host;
    }

    public ServerMetrics metrics() {
        return metrics;
    }

    /** Waits until the model is loaded (or failed), for tests and tools. */
    public void awaitLoaded() throws InterruptedException {
        loader.join();
    }

    @Override
    public void close() {
        server.close();
        if (host.state() instanceof ModelHost.Ready ready) {
            ready.model().close();
        }
        metrics.close();
    }
}
