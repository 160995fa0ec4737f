package dev.glimmer.server.cli;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.server.GlimmerApp;
import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.config.ServerConfigLoader;
import dev.glimmer.server.inference.ModelHost;
import io.helidon.logging.common.LogConfig;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

/** {@code ./glimmer serve}: the OpenAI-compatible server. */
final class ServeCommand implements Command {

    /** Each flag and the configuration key it overrides. */
    private static final Map<String, String> FLAG_KEYS = flagKeys();

    // One line per flag: the one place that ties a flag to the configuration key it overrides.
    private static Map<String, String> flagKeys() {
        Map<String, String> m = new LinkedHashMap<>();
        m.put("--model", "model.path");
        m.put("--host", "server.host");
        m.put("--port", "server.port");
        m.put("--backend", "model.backend");
        m.put("--ctx", "model.ctx");
        m.put("--threads", "model.threads");
        m.put("--api-key", "server.api-key");
        m.put("--parallel", "inference.parallel");
        m.put("--prompt-chunk", "inference.prompt-chunk");
        m.put("--queue", "inference.queue");
        m.put("--kv-budget", "inference.kv-budget-mb");
        m.put("--max-body", "server.max-body");
        m.put("--cors", "server.cors-origins");
        return m;
    }

    @Override
    public String name() {
        return "serve";
    }

    @Override
    public String summary() {
        return "run the OpenAI-compatible server (a demo model with random weights when no --model is given)";
    }

    @Override
    public List<Option> options() {
        return List.of(
                Option.value("--model", "F", "the GGUF file to serve (default: the demo model, random weights)"),
                Option.value("--host", "H", "address to bind (default 127.0.0.1)"),
                Option.value("--port", "P", "port to listen on (default 8080; 0 picks a free one)"),
                Option.value("--backend", "B", BackendKind.alternatives(BackendKind.SERVING) + " (default auto)"),
                Option.value("--ctx", "N", "context length in tokens (default 8192)"),
                Option.value("--threads", "N", "worker threads (default: available cores)"),
                Option.value("--api-key", "K", "require this key as 'Authorization: Bearer K'"),
                Option.value("--parallel", "N", "sequences decoded together (default 2)"),
                Option.value("--prompt-chunk", "N", "prompt tokens processed per step (default 512)"),
                Option.value("--queue", "N", "requests that may wait for a slot; more get 503 (default 16)"),
                Option.value("--kv-budget", "MB", "memory for cached conversations (default: from the context)"),
                Option.value("--max-body", "SIZE", "largest request body, e.g. 4M (default 4M)"),
                Option.value("--cors", "ORIGINS", "comma-separated origins allowed by CORS, or * (default: CORS off)"),
                Option.value("--config", "F", "a YAML file replacing the bundled config/application.yaml"));
    }

    @Override
    public String details() {
        return """
                Settings come from config/application.yaml, then GLIMMER_* environment variables
                (GLIMMER_SERVER_PORT=9090, GLIMMER_MODEL_PATH=model.gguf, ...), then these flags.
                Ctrl-C stops the server gracefully: running streams get their final chunk.
                """;
    }

    @Override
    public int run(Args args, Terminal io) throws Exception {
        Map<String, String> flags = new LinkedHashMap<>();
        FLAG_KEYS.forEach((flag, key) -> args.optional(flag).ifPresent(v -> flags.put(key, v)));
        // logging.properties (from config/, in the jar): one line per record on stderr.
        LogConfig.configureRuntime();
        ServerConfig config = ServerConfigLoader.load(args.optional("--config").map(Path::of), System.getenv(), flags);
        config.model().ifPresent(path -> {
            if (Files.isDirectory(path)) {
                throw new UsageException(path + " is a directory; --model takes a GGUF file");
            }
            if (!Files.isRegularFile(path)) {
                throw new UsageException("no such model file: " + path);
            }
        });
        CountDownLatch stopped = new CountDownLatch(1);
        GlimmerApp app = GlimmerApp.start(config, System.getenv());
        // The server answers /health (503) while the model loads; a model that cannot load ends serve.
        app.awaitLoaded();
        if (app.host().state() instanceof ModelHost.Failed failed) {
            app.close();
            if (failed.cause() instanceof InvalidInputException || failed.cause() instanceof IOException) {
                throw new InvalidInputException("cannot serve the model: " + failed.reason());
            }
            // A bug: the log has its stack trace; exit 1.
            throw new IllegalStateException("cannot serve the model: " + failed.cause(), failed.cause());
        }
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            io.err().println("glimmer serve: stopping (running streams get their final chunk)");
            app.close();
            // Said here because the JVM's log handlers are already closed while shutdown hooks run.
            io.err().println("glimmer serve: stopped");
            stopped.countDown();
        }, "glimmer-shutdown"));
        stopped.await();
        return 0;
    }
}
