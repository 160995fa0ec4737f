package dev.glimmer.server;

import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.config.ServerConfigLoader;

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
        flags.putAll(overrides);
        return ServerConfigLoader.load(Optional.empty(), Map.of(), flags);
    }

    /** Starts a server and waits until its model is loaded. */
    public static GlimmerApp start(Map<String, String> overrides) {
        GlimmerApp app = GlimmerApp.start(config(overrides), Map.of());
        try {
            app.awaitLoaded();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
        return app;
    }

    private TestServer() {
    }
}
