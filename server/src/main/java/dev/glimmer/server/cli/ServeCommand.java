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
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;
import sun.misc.Signal;

/** {@code ./glimmer serve}: the OpenAI-compatible server. */
@Command(
        name = "serve",
        description = "run the OpenAI-compatible server (a demo model with random weights when no --model is given)",
        footer = """
                Settings come from config/application.yaml, then GLIMMER_* environment variables
                (GLIMMER_SERVER_PORT=9090, GLIMMER_MODEL_PATH=model.gguf, ...), then these flags.
                Ctrl-C stops the server gracefully: running streams get their final chunk.
                SIGTERM (docker stop, Kubernetes) drains first: new requests get 503 and /ready 503,
                running ones may finish within --drain-seconds, then the server stops.""")
final class ServeCommand implements Subcommand {

    /** A flag that overrides a configuration key; its value goes to the loader as text, checked there like the others. */
    private record Setting(String flag, String valueName, String key, String description) {}

    private static final List<Setting> SETTINGS = List.of(
            new Setting(
                    "--model", "F", "model.path", "the GGUF file to serve (default: the demo model, random weights)"),
            new Setting("--host", "H", "server.host", "address to bind (default 127.0.0.1)"),
            new Setting("--port", "P", "server.port", "port to listen on (default 8080; 0 picks a free one)"),
            new Setting(
                    "--backend",
                    "B",
                    "model.backend",
                    BackendKind.alternatives(BackendKind.SERVING) + " (default auto)"),
            new Setting("--ctx", "N", "model.ctx", "context length in tokens (default: the model's own, at most 8192)"),
            new Setting(
                    "--threads", "N", "model.threads", "worker threads for the math (default: one per physical core)"),
            new Setting(
                    "--api-key",
                    "K",
                    "server.api-key",
                    "require this key (or one of these, comma-separated) as 'Authorization: Bearer K' or 'x-api-key: K'"),
            new Setting(
                    "--allowed-hosts",
                    "NAMES",
                    "server.allowed-hosts",
                    "Host names served besides localhost, 127.0.0.1, [::1], comma-separated, or * (default: none)"),
            new Setting("--parallel", "N", "inference.parallel", "sequences decoded together (default 2)"),
            new Setting(
                    "--prompt-chunk", "N", "inference.prompt-chunk", "prompt tokens processed per step (default 512)"),
            new Setting(
                    "--queue", "N", "inference.queue", "requests that may wait for a slot; more get 503 (default 16)"),
            new Setting(
                    "--kv-budget",
                    "MB",
                    "inference.kv-budget-mb",
                    "memory for cached conversations (default: from the context)"),
            new Setting(
                    "--gpu-memory",
                    "GB",
                    "inference.gpu-memory-gb",
                    "GPU memory the server may take, weights included (default: all the device has free)"),
            new Setting(
                    "--cache-ram",
                    "MB",
                    "inference.cache-ram-mb",
                    "host memory for conversations evicted from the KV budget (default 0)"),
            new Setting(
                    "--cache-dir",
                    "DIR",
                    "inference.cache-dir",
                    "directory of the disk tier of cached conversations (default ~/.cache/glimmer/kv)"),
            new Setting(
                    "--cache-disk",
                    "MB",
                    "inference.cache-disk-mb",
                    "disk space for cached conversations, least recently used out first; 0 = none (default 4096)"),
            new Setting(
                    "--draft",
                    "D",
                    "inference.draft",
                    "mtp: draft tokens with the model's NextN (MTP) block and verify them in one pass (the same output;"
                            + " each conversation stops drafting while it does not pay); none: plain decode steps"
                            + " (default: mtp when the model has the block and the backend drafts, else none)"),
            new Setting("--draft-tokens", "N", "inference.draft-tokens", "tokens drafted per step, 1 or 2 (default 1)"),
            new Setting("--max-body", "SIZE", "server.max-body", "largest request body, e.g. 4M (default 4M)"),
            new Setting(
                    "--cors",
                    "ORIGINS",
                    "server.cors-origins",
                    "pages of other origins that may call the server:"
                            + " origins, local, * or none, comma-separated (default: local = pages from localhost, 127.0.0.1, [::1])"),
            new Setting(
                    "--drain-seconds",
                    "S",
                    "server.drain-seconds",
                    "on SIGTERM, how long running requests may finish (default 30)"));

    private CommandSpec spec;

    // The settings are declared from their table rather than as fields, so that each flag and its key stand on one
    // line.
    @Override
    public void addOptions(CommandSpec spec) {
        this.spec = spec;
        for (Setting s : SETTINGS) {
            spec.addOption(OptionSpec.builder(s.flag())
                    .paramLabel(s.valueName())
                    .type(String.class)
                    .description(s.description())
                    .build());
        }
        spec.addOption(OptionSpec.builder("--config")
                .paramLabel("F")
                .type(Path.class)
                .description("a YAML file replacing the bundled config/application.yaml")
                .build());
    }

    @Override
    public int run(Terminal io) throws Exception {
        Map<String, String> flags = new LinkedHashMap<>();
        Map<String, String> flagNames = new LinkedHashMap<>();
        for (Setting s : SETTINGS) {
            flagNames.put(s.key(), s.flag());
            String value = spec.findOption(s.flag()).getValue();
            if (value != null) {
                flags.put(s.key(), value);
            }
        }
        // logging.properties (from config/, in the jar): one line per record on stderr.
        LogConfig.configureRuntime();
        ServerConfig config = ServerConfigLoader.load(
                Optional.ofNullable(spec.findOption("--config").<Path>getValue()), System.getenv(), flags, flagNames);
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
        drainOnSigterm(app, Duration.ofSeconds(config.drainSeconds()), io);
        Runtime.getRuntime()
                .addShutdownHook(new Thread(
                        () -> {
                            io.err().println("glimmer serve: stopping (running streams get their final chunk)");
                            app.close();
                            // Said here because the JVM's log handlers are already closed while shutdown hooks run.
                            io.err().println("glimmer serve: stopped");
                            stopped.countDown();
                        },
                        "glimmer-shutdown"));
        stopped.await();
        return 0;
    }

    /**
     * SIGTERM, what {@code docker stop} and Kubernetes send, drains the server ({@link GlimmerApp#drain}) and then
     * exits, which runs the shutdown hook; a second SIGTERM exits at once. SIGINT (Ctrl-C) goes straight to the hook.
     */
    private static void drainOnSigterm(GlimmerApp app, Duration grace, Terminal io) {
        AtomicBoolean draining = new AtomicBoolean();
        Signal.handle(new Signal("TERM"), signal -> {
            if (draining.getAndSet(true)) {
                System.exit(0);
            }
            io.err()
                    .println("glimmer serve: draining (SIGTERM): new requests get 503; running ones have up to "
                            + grace.toSeconds() + " s to finish");
            Thread.ofPlatform().name("glimmer-drain").start(() -> {
                try {
                    app.drain(grace);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                System.exit(0);
            });
        });
    }
}
