package dev.glimmer.server;

import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.config.ServerConfigLoader;
import dev.glimmer.server.inference.BackendChooser;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;

/** A real Glimmer server on a free port serving the tiny oracle model, for tests. */
public final class TestServer {

    public static Path tinyModel() {
        return EngineTestData.model("tiny-f32");
    }

    /** The bundled defaults with the tiny model, port 0, and {@code overrides} (configuration keys). */
    public static ServerConfig config(Map<String, String> overrides) {
        Map<String, String> flags = new HashMap<>();
        flags.put("model.path", tinyModel().toString());
        flags.put("server.port", "0");
        flags.put("model.ctx", "1024");
        // The CPU whatever the machine has: auto would take a GPU where there is one.
        flags.put("model.backend", "cpu");
        // No disk tier unless a test asks: the servers of other tests must not find each other's conversations.
        flags.put("inference.cache-disk-mb", "0");
        flags.putAll(overrides);
        return ServerConfigLoader.load(Optional.empty(), Map.of(), flags);
    }

    /** Starts a server and waits until its model is loaded. */
    public static GlimmerApp start(Map<String, String> overrides) {
        return awaitLoaded(GlimmerApp.start(config(overrides), Map.of()));
    }

    /** Starts a server on the backend {@code backends} gives and waits until its model is loaded. */
    public static GlimmerApp start(Map<String, String> overrides, BackendChooser backends) {
        return awaitLoaded(GlimmerApp.start(config(overrides), Map.of(), backends));
    }

    private static GlimmerApp awaitLoaded(GlimmerApp app) {
        try {
            app.awaitLoaded();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
        return app;
    }

    private TestServer() {}
}
