package dev.glimmer.server;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.backend.choice.Backends;
import dev.glimmer.engine.generate.Drafting;
import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.inference.BackendChooser;
import dev.glimmer.server.inference.DemoModel;
import dev.glimmer.server.inference.ModelHost;
import dev.glimmer.server.inference.Scheduler;
import dev.glimmer.server.inference.ServedModel;
import dev.glimmer.server.metrics.ServerMetrics;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * A running Glimmer server: starts listening at once (so {@code /health} can answer 503 while
 * loading), loads the model on a background thread, drains ({@link #drain}) and shuts everything down in order.
 */
public final class GlimmerApp implements AutoCloseable {
    private static final Logger LOG = Logger.getLogger(GlimmerApp.class.getName());
    /** How often draining looks whether the accepted requests have finished. */
    private static final Duration DRAIN_POLL = Duration.ofMillis(20);

    private final ServerConfig config;
    private final Map<String, String> environment;
    private final BackendChooser backends;
    private final Drafting.Use draftUse;
    private final ServerMetrics metrics = new ServerMetrics();
    private final ModelHost host = new ModelHost();
    private final GlimmerServer server;
    private final Thread loader;

    private GlimmerApp(
            ServerConfig config, Map<String, String> environment, BackendChooser backends, Drafting.Use draftUse) {
        this.config = config;
        this.environment = environment;
        this.backends = backends;
        this.draftUse = draftUse;
        this.server = GlimmerServer.start(config, host, metrics);
        LOG.info("listening on http://" + config.host() + ":" + server.port() + " (model loading)");
        this.loader = Thread.ofPlatform().name("glimmer-model-loader").start(this::load);
    }

    /** @param environment where the demo model's cache directory is looked up (XDG_CACHE_HOME) */
    public static GlimmerApp start(ServerConfig config, Map<String, String> environment) {
        return new GlimmerApp(config, environment, Backends::choose, Drafting.Use.WHILE_PAYING);
    }

    /** A server whose backend comes from {@code backends} rather than {@code --backend} (tests: a GPU-style pool without a GPU). */
    static GlimmerApp start(ServerConfig config, Map<String, String> environment, BackendChooser backends) {
        return new GlimmerApp(config, environment, backends, Drafting.Use.WHILE_PAYING);
    }

    /**
     * A server whose backend comes from {@code backends} and whose conversations draft as {@code draftUse} says
     * (tests: {@link Drafting.Use#ALWAYS}, every lone decode step speculative whatever it costs).
     */
    static GlimmerApp start(
            ServerConfig config, Map<String, String> environment, BackendChooser backends, Drafting.Use draftUse) {
        return new GlimmerApp(config, environment, backends, draftUse);
    }

    private void load() {
        try {
            boolean demo = config.model().isEmpty();
            Path path = demo
                    ? DemoModel.ensure(environment, host::progress)
                    : config.model().get();
            if (demo) {
                LOG.warning("no --model given: serving the DEMO model " + path + " (tiny, RANDOM weights: its output is"
                        + " gibberish, " + DemoModel.MAX_TOKENS
                        + " tokens per answer unless asked for more, no thinking"
                        + " unless asked; pass --model F"
                        + " for a real model)");
            }
            host.progress("loading " + path);
            long start = System.nanoTime();
            ServedModel model = ServedModel.load(path, demo, config, metrics, backends, draftUse);
            host.ready(model);
            LOG.info("model " + model.facts().id() + " ready in " + (System.nanoTime() - start) / 1_000_000 + " ms ("
                    + model.facts().params() + " parameters, " + model.facts().quant() + ", context " + model.ctx()
                    + ", backend " + model.facts().backend() + ")");
        } catch (InvalidInputException | IOException e) {
            // The file's fault, said once: serve ends with it, a running server's routes answer 503 with it.
            host.failed(e);
        } catch (RuntimeException | Error e) {
            LOG.log(Level.SEVERE, "the model failed to load", e);
            host.failed(e);
        }
    }

    public int port() {
        return server.port();
    }

    public ModelHost host() {
        return host;
    }

    /** Waits until the model is loaded (or failed), for tests and tools. */
    public void awaitLoaded() throws InterruptedException {
        loader.join();
    }

    /**
     * Stops taking requests (they get 503, {@code /ready} says 503, {@code /health} "draining") and waits up to
     * {@code grace} for the accepted ones, running or waiting, to finish. {@link #close} then stops the server; it
     * ends whatever still runs with a final chunk.
     *
     * @return whether every accepted request finished within {@code grace}
     */
    public boolean drain(Duration grace) throws InterruptedException {
        host.drain();
        if (!(host.state() instanceof ModelHost.Ready ready)) {
            return true;
        }
        Scheduler scheduler = ready.model().scheduler();
        LOG.info("draining: new requests get 503; waiting up to " + grace.toSeconds() + " s for " + scheduler.admitted()
                + " accepted requests to finish");
        long deadline = System.nanoTime() + grace.toNanos();
        while (scheduler.admitted() > 0 && System.nanoTime() < deadline) {
            Thread.sleep(DRAIN_POLL.toMillis());
        }
        int left = scheduler.admitted();
        if (left > 0) {
            LOG.warning(left + " requests still running after " + grace.toSeconds() + " s of draining; they end now");
        }
        return left == 0;
    }

    @Override
    public void close() {
        close(ServedModel.STOP_WAIT);
    }

    /** {@link #close()} waiting at most {@code stepWait} for a running forward step (tests: a step that never returns). */
    void close(Duration stepWait) {
        try {
            loader.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (host.state() instanceof ModelHost.Ready ready) {
            // Running generations end first, so that their streams get a final chunk before the server stops.
            ready.model().close(stepWait);
        }
        server.close();
        metrics.close();
        LOG.info("stopped");
    }
}
