package dev.glimmer.server.config;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.server.http.CorsFilter;
import io.helidon.config.Config;
import io.helidon.config.ConfigSources;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.function.Function;

/**
 * Builds a {@link ServerConfig} from three layers, the later winning: the defaults in
 * {@code application.yaml} (shipped in the jar, or a file given with {@code --config}), environment
 * variables named {@code GLIMMER_} + the key's path in capitals with {@code _} for {@code .} and
 * {@code -} ({@code GLIMMER_SERVER_PORT}), and CLI flags (passed in by their key). Every value is
 * checked; a bad one is an {@link InvalidInputException} naming what the user wrote: the flag typed
 * ({@code --ctx must be ...}), else the key and where it came from.
 *
 * <p>Helidon's config reads the YAML layer. The other two are looked up here by hand, on purpose:
 * a merged Helidon {@code Config} cannot tell which source a value came from (the errors name it),
 * and its environment-variable aliases spell {@code -} as {@code _dash_}
 * ({@code GLIMMER_INFERENCE_KV_dash_BUDGET_dash_MB}), where Glimmer documents {@code _}.
 */
public final class ServerConfigLoader {
    private final Config yaml;
    private final String yamlName;
    private final Map<String, String> environment;
    private final Map<String, String> flags;
    private final Map<String, String> flagNames;

    private ServerConfigLoader(
            Config yaml,
            String yamlName,
            Map<String, String> environment,
            Map<String, String> flags,
            Map<String, String> flagNames) {
        this.yaml = yaml;
        this.yamlName = yamlName;
        this.environment = environment;
        this.flags = flags;
        this.flagNames = flagNames;
    }

    /** {@link #load(Optional, Map, Map, Map)} with the flags' values named by their keys in errors (tests, embedders). */
    public static ServerConfig load(
            Optional<Path> configFile, Map<String, String> environment, Map<String, String> flags) {
        return load(configFile, environment, flags, Map.of());
    }

    /**
     * @param configFile  a YAML file replacing the bundled application.yaml, or empty
     * @param environment the process environment (tests pass their own)
     * @param flags       CLI values by configuration key, e.g. {@code server.port -> 9090}
     * @param flagNames   the flag that sets each key, e.g. {@code server.port -> --port}, for errors
     */
    public static ServerConfig load(
            Optional<Path> configFile,
            Map<String, String> environment,
            Map<String, String> flags,
            Map<String, String> flagNames) {
        Config.Builder builder =
                Config.builder().disableEnvironmentVariablesSource().disableSystemPropertiesSource();
        String name;
        if (configFile.isPresent()) {
            Path file = configFile.get();
            if (!Files.isRegularFile(file)) {
                throw new InvalidInputException("no such configuration file: " + file);
            }
            builder.addSource(ConfigSources.file(file));
            name = file.toString();
        } else {
            builder.addSource(ConfigSources.classpath("application.yaml"));
            name = "application.yaml";
        }
        return new ServerConfigLoader(builder.build(), name, environment, flags, flagNames).build();
    }

    private ServerConfig build() {
        ServerConfig.SamplingDefaults sampling = new ServerConfig.SamplingDefaults(
                (float) decimal("sampling.temperature", 0.8, 0, 100),
                (int) integer("sampling.top-k", 40, 0, Integer.MAX_VALUE),
                (float) decimal("sampling.top-p", 0.95, Double.MIN_VALUE, 1),
                (float) decimal("sampling.min-p", 0.05, 0, 1),
                (int) integer("sampling.max-tokens", -1, -1, Integer.MAX_VALUE));
        String backendName = text("model.backend", "auto");
        BackendKind backend;
        try {
            backend = BackendKind.parse(backendName, BackendKind.SERVING);
        } catch (InvalidInputException e) {
            throw bad(
                    "model.backend",
                    value("model.backend", "auto"),
                    "must be " + BackendKind.alternatives(BackendKind.SERVING) + ", got '" + backendName + "'");
        }
        String draftName = text("inference.draft", "auto");
        ServerConfig.DraftMode draftMode;
        try {
            draftMode = ServerConfig.DraftMode.valueOf(draftName.toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw bad(
                    "inference.draft",
                    value("inference.draft", "auto"),
                    "must be mtp, none or auto, got '" + draftName + "'");
        }
        String modelPath = text("model.path", "");
        return new ServerConfig(
                text("server.host", "127.0.0.1"),
                (int) integer("server.port", 8080, 0, 65535),
                list("server.api-key", ""),
                list("server.allowed-hosts", ""),
                list("server.cors-origins", CorsFilter.LOCAL),
                size("server.max-body", "4M"),
                modelPath.isEmpty() ? Optional.empty() : Optional.of(Path.of(modelPath)),
                backend,
                context(),
                (int) integer("model.threads", 0, 0, 4096),
                (int) integer("inference.parallel", 2, 1, 256),
                (int) integer("inference.prompt-chunk", 512, 1, 8192),
                (int) integer("inference.queue", 16, 0, 1 << 20),
                integer("inference.kv-budget-mb", 0, 0, 1L << 30),
                integer("inference.gpu-memory-gb", 0, 0, 1L << 20),
                sampling,
                new ServerConfig.CacheTiers(
                        integer("inference.cache-ram-mb", 0, 0, 1L << 30),
                        Path.of(
                                text("inference.cache-dir", "").isBlank()
                                        ? defaultCacheDir()
                                        : text("inference.cache-dir", "")),
                        integer("inference.cache-disk-mb", 4096, 0, 1L << 40)),
                new ServerConfig.Drafts(draftMode, (int) integer("inference.draft-tokens", 1, 1, 2)),
                (int) integer("server.drain-seconds", 30, 0, 3600));
    }

    /** {@code ~/.cache/glimmer/kv}, under {@code XDG_CACHE_HOME} where that is set. */
    private static String defaultCacheDir() {
        String xdg = System.getenv("XDG_CACHE_HOME");
        Path base = xdg != null && !xdg.isBlank() ? Path.of(xdg) : Path.of(System.getProperty("user.home"), ".cache");
        return base.resolve("glimmer").resolve("kv").toString();
    }

    /** The environment variable that overrides {@code key}. */
    public static String environmentName(String key) {
        return "GLIMMER_" + key.toUpperCase(Locale.ROOT).replace('.', '_').replace('-', '_');
    }

    /**
     * A setting's text and where it came from.
     *
     * @param flag the flag it was typed as, when it came from the command line and the flag is known
     */
    private record Value(String text, String source, Optional<String> flag) {
        Value(String text, String source) {
            this(text, source, Optional.empty());
        }
    }

    private Value value(String key, String fallback) {
        if (flags.containsKey(key)) {
            return new Value(flags.get(key), "the command line", Optional.ofNullable(flagNames.get(key)));
        }
        String env = environmentName(key);
        if (environment.containsKey(env)) {
            return new Value(environment.get(env), "environment variable " + env);
        }
        Optional<String> fromYaml = yaml.get(key).asString().asOptional();
        return fromYaml.map(v -> new Value(v, yamlName)).orElseGet(() -> new Value(fallback, "the built-in default"));
    }

    private String text(String key, String fallback) {
        return value(key, fallback).text().strip();
    }

    /** A comma-separated list; empty entries are dropped. */
    private List<String> list(String key, String fallback) {
        return Arrays.stream(text(key, fallback).split(","))
                .map(String::strip)
                .filter(s -> !s.isEmpty())
                .toList();
    }

    private long integer(String key, long fallback, long min, long max) {
        return number(key, fallback, min, max, Long::valueOf, "an integer");
    }

    private double decimal(String key, double fallback, double min, double max) {
        // + 0.0 turns -0.0 into 0.0, which compareTo would otherwise order below a minimum of 0.
        return number(key, fallback, min, max, text -> Double.parseDouble(text) + 0.0, "a number");
    }

    /** The value of {@code key} as {@code parse} reads it, in [min, max] (NaN is not); {@code what} names the type. */
    private <T extends Comparable<T>> T number(
            String key, T fallback, T min, T max, Function<String, T> parse, String what) {
        Value v = value(key, fallback.toString());
        T n;
        try {
            n = parse.apply(v.text().strip());
        } catch (NumberFormatException e) {
            throw bad(key, v, "must be " + what + ", got '" + v.text() + "'");
        }
        if (n.compareTo(min) < 0 || n.compareTo(max) > 0) {
            throw bad(key, v, "must be in [" + min + ", " + max + "], got " + n);
        }
        return n;
    }

    /**
     * {@code model.ctx}: 0 (the default) serves the model's own context, at most
     * {@link ServerConfig#DEFAULT_CTX}; a value is the context asked for (capped at the model's own).
     */
    private int context() {
        int ctx = (int) integer("model.ctx", 0, 0, ServerConfig.MAX_CTX);
        if (ctx > 0 && ctx < ServerConfig.MIN_CTX) {
            throw bad(
                    "model.ctx",
                    value("model.ctx", "0"),
                    "must be at least " + ServerConfig.MIN_CTX + " (or 0: the model's own, at most "
                            + ServerConfig.DEFAULT_CTX + "), got " + ctx);
        }
        return ctx;
    }

    /** A byte count such as {@code 4096}, {@code 64K} or {@code 4M}. */
    private long size(String key, String fallback) {
        Value v = value(key, fallback);
        String t = v.text().strip().toUpperCase(Locale.ROOT);
        long unit = 1;
        if (t.endsWith("K") || t.endsWith("M")) {
            unit = t.endsWith("K") ? 1024 : 1024 * 1024;
            t = t.substring(0, t.length() - 1).strip();
        }
        try {
            long n = Long.parseLong(t);
            if (n <= 0 || n > (1L << 40) / unit) {
                throw new NumberFormatException();
            }
            return n * unit;
        } catch (NumberFormatException e) {
            throw bad(key, v, "must be a positive size such as 4096, 64K or 4M, got '" + v.text() + "'");
        }
    }

    /** A bad value: named by the flag typed, else by its key and where it came from. */
    private static InvalidInputException bad(String key, Value v, String message) {
        return new InvalidInputException(v.flag()
                .map(flag -> flag + " " + message)
                .orElse("configuration " + key + " " + message + " (from " + v.source() + ")"));
    }
}
