package dev.glimmer.server.cli;

import dev.glimmer.engine.gguf.GgufWriter;
import dev.glimmer.engine.synth.ModelSynthesizer;
import dev.glimmer.engine.synth.SynthModel;
import dev.glimmer.engine.synth.SynthPreset;
import dev.glimmer.engine.synth.SynthWeightType;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code ./glimmer synth}: writes a random GLM-4.7-Flash-architecture GGUF. */
@Command(
        name = "synth",
        description =
                "write a random GLM-4.7-Flash-architecture GGUF (full = the real shapes, ~17 GB, streamed to disk)",
        footer = """
                Norms, the router and the expert bias stay F32. The file is written under F.partial and renamed
                when complete. full needs about 17 GB (q4_0) of free space plus a margin; it is refused otherwise.
                q4_k_m is llama-quantize's Q4_K_M mix (Q4_K, Q6_K for the output and some ffn_down, Q5_0 where
                rows are not whole 256-value blocks), its blocks drawn at random.
                Example: ./glimmer synth --preset full --wtype q4_0 -o /tmp/glm-full-q4_0.gguf""")
final class SynthCommand implements Subcommand {

    @Option(
            names = "--preset",
            paramLabel = "P",
            required = true,
            description = "tiny, small (the oracle configs) or full (the real GLM-4.7-Flash)")
    String presetName;

    @Option(
            names = "--wtype",
            paramLabel = "T",
            required = true,
            description = "type of the weight matrices: f32, f16, q8_0, q4_0 or q4_k_m (a mix)")
    String weightTypeName;

    @Option(
            names = "--seed",
            paramLabel = "S",
            description = "random seed (default 1); the same seed gives the same bytes")
    long seed = 1;

    @Option(
            names = "--mtp",
            description = "also write the multi-token-prediction (NextN) block after the trunk, as newer"
                    + " GLM-4.7-Flash files carry it (block_count + 1, nextn_predict_layers 1): the drafter of"
                    + " --draft mtp")
    boolean mtp;

    @Option(
            names = {"-o", "--output"},
            paramLabel = "F",
            required = true,
            description = "the file to write")
    Path out;

    @Override
    public int run(Terminal io) throws Exception {
        SynthPreset preset = SynthPreset.byName(presetName);
        SynthWeightType weightType = SynthWeightType.byName(weightTypeName);
        SynthModel model = SynthModel.of(preset, weightType, seed, mtp);
        ProgressLine progress = new ProgressLine(io.err());
        // Ctrl-C ends the JVM without unwinding this thread: remove the unfinished file on the way out.
        Path partial = GgufWriter.partialPath(out);
        Thread cleanup = new Thread(() -> {
            try {
                Files.deleteIfExists(partial);
            } catch (IOException ignored) {
                // Nothing more can be done while the JVM exits.
            }
        });
        Runtime.getRuntime().addShutdownHook(cleanup);
        try {
            ModelSynthesizer.write(model, out, progress::update);
        } finally {
            Runtime.getRuntime().removeShutdownHook(cleanup);
        }
        progress.finish();
        io.err()
                .printf(
                        Locale.ROOT,
                        "wrote %s: preset %s%s, %s weights, seed %d, %d tensors, %d bytes in %.1f s%n",
                        out,
                        preset.name(),
                        mtp ? " with the MTP block" : "",
                        weightType.name().toLowerCase(Locale.ROOT),
                        seed,
                        model.tensors().size(),
                        ModelSynthesizer.fileSize(model),
                        progress.elapsedSeconds());
        return 0;
    }

    /** One line on stderr, rewritten in place: percentage, GB written, ETA. */
    private static final class ProgressLine {
        private static final long UPDATE_NANOS = 250_000_000L;
        private final PrintStream err;
        private final long start = System.nanoTime();
        private long lastUpdate;
        private boolean shown;

        ProgressLine(PrintStream err) {
            this.err = err;
        }

        void update(long written, long total) {
            long now = System.nanoTime();
            if (now - lastUpdate < UPDATE_NANOS && written < total) {
                return;
            }
            lastUpdate = now;
            double seconds = (now - start) / 1e9;
            double fraction = total == 0 ? 1 : (double) written / total;
            String eta = fraction > 0 && seconds > 1 ? duration(seconds / fraction - seconds) : "--";
            double unit = total >= 1e9 ? 1e9 : 1e6;
            err.printf(
                    Locale.ROOT,
                    "\rwriting %5.1f%%  %7.2f / %.2f %s  ETA %s   ",
                    100 * fraction,
                    written / unit,
                    total / unit,
                    unit == 1e9 ? "GB" : "MB",
                    eta);
            err.flush();
            shown = true;
        }

        void finish() {
            if (shown) {
                err.println();
            }
        }

        double elapsedSeconds() {
            return (System.nanoTime() - start) / 1e9;
        }

        private static String duration(double seconds) {
            long s = Math.round(seconds);
            return s >= 60 ? (s / 60) + "m" + String.format(Locale.ROOT, "%02d", s % 60) + "s" : s + "s";
        }
    }
}
