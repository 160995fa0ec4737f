package dev.glimmer.server.inference;

import dev.glimmer.engine.synth.ModelSynthesizer;
import dev.glimmer.engine.synth.SynthModel;
import dev.glimmer.engine.synth.SynthPreset;
import dev.glimmer.engine.synth.SynthWeightType;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.function.Consumer;

/**
 * The model {@code serve} uses when none is given: the synth preset {@code tiny} with a fixed seed,
 * written once to the user's cache directory ({@code $XDG_CACHE_HOME/glimmer}, else
 * {@code ~/.cache/glimmer}). Its weights are random: it answers gibberish, quickly, so that the
 * server, the API and the web chat can be tried without downloading anything.
 */
public final class DemoModel {
    static final long SEED = 42;
    static final SynthWeightType WEIGHTS = SynthWeightType.F32;
    static final String FILE_NAME = "glimmer-demo-tiny-f32-seed42.gguf";
    /**
     * The most tokens a demo answer gets when its request sets no limit: random weights never end an
     * answer (nor close a thought), so a first look would otherwise wait for the whole context.
     */
    public static final int MAX_TOKENS = 128;

    private DemoModel() {}

    /** The demo model's file, written first if it is not there yet. */
    public static Path ensure(Map<String, String> environment, Consumer<String> progress) throws IOException {
        Path file = file(environment);
        if (Files.isRegularFile(file)) {
            return file;
        }
        Files.createDirectories(file.getParent());
        progress.accept("writing the demo model (random weights) to " + file);
        ModelSynthesizer.write(
                SynthModel.of(SynthPreset.TINY, WEIGHTS, SEED),
                file,
                (written, total) -> progress.accept("writing the demo model: " + written * 100 / total + "%"));
        return file;
    }

    /** Where the demo model's file is (or will be written). */
    public static Path file(Map<String, String> environment) {
        return directory(environment).resolve(FILE_NAME);
    }

    static Path directory(Map<String, String> environment) {
        String xdg = environment.get("XDG_CACHE_HOME");
        Path base = xdg != null && !xdg.isBlank() ? Path.of(xdg) : Path.of(System.getProperty("user.home"), ".cache");
        return base.resolve("glimmer");
    }
}
