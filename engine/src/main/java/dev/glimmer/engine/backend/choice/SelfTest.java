package dev.glimmer.engine.backend.choice;

import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.commandlist.DecodeModels;
import dev.glimmer.engine.backend.commandlist.LayerProbe;
import dev.glimmer.engine.backend.cpu.FloatActivationBackend;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.synth.ModelSynthesizer;
import dev.glimmer.engine.synth.SynthModel;
import dev.glimmer.engine.synth.SynthPreset;
import dev.glimmer.engine.synth.SynthWeightType;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.KernelLibrary;
import dev.glimmer.kernels.KernelParam;
import dev.glimmer.kernels.decode.CommandList;
import dev.glimmer.kernels.decode.DecodeCommandListBuilder;
import dev.glimmer.kernels.decode.DecodeModel;
import dev.glimmer.kernels.decode.Dispatch;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;

/**
 * Checks a GPU decode path against the CPU backend before it may serve: built-in tiny models (the
 * synthetic {@code tiny} preset with F32, F16, Q8_0 and Q4_0 weights, fixed seed) decode a fixed token sequence
 * on both, the CPU with the kernels' float activations ({@link FloatActivationBackend}); at every step the logits must agree within a tolerance relative to the CPU's logit
 * range, and the GPU's argmax dispatch must pick a largest GPU logit.
 */
public final class SelfTest {

    /** Seed of the built-in models: fixed, so that every run checks the same weights. */
    static final long SEED = 9;
    /** The tokens fed one step at a time (ordinary BPE tokens of the tiny vocabulary). */
    static final int[] TOKENS = {17, 300, 5, 611, 42, 128, 9, 250};

    /** How far the GPU's logits may be from the CPU's, as a fraction of the CPU's logit range. */
    static final double TOLERANCE = 1e-3;

    /** A built-in model: the tiny preset with {@code weights}. */
    record Case(SynthWeightType weights) {
        String name() {
            return "tiny-" + weights.name().toLowerCase(Locale.ROOT);
        }
    }

    /** Every weight type the synthesizer writes, so that each type path of the mat-vec kernels runs. */
    static final List<Case> CASES = List.of(
            new Case(SynthWeightType.F32),
            new Case(SynthWeightType.F16),
            new Case(SynthWeightType.Q8_0),
            new Case(SynthWeightType.Q4_0));

    /**
     * Makes a GPU pool of one sequence of {@code capacity} positions for {@code model}; where it is a {@link LayerProbe},
     * a failed decode step is traced to its first wrong layer.
     */
    public interface GpuPools {
        SequencePool open(GlmModel model, int capacity);
    }

    /**
     * One check.
     *
     * @param name     what was compared
     * @param maxError the largest |GPU − CPU| logit difference
     * @param limit    the largest allowed
     * @param where    where the largest difference (or the wrong argmax) was; for a GPU that can run
     *                 partial steps, also the first layer that is off and its kernels
     * @param passed   whether it is within the limit and every argmax was right
     */
    public record Check(String name, double maxError, double limit, String where, boolean passed) {
        String line() {
            if (Double.isNaN(limit)) {
                return "FAIL " + name + ": " + where;
            }
            return String.format(
                    Locale.ROOT,
                    "%s %s: max |Δlogit| %.3g (limit %.3g) %s",
                    passed ? "PASS" : "FAIL",
                    name,
                    maxError,
                    limit,
                    where);
        }
    }

    /** The result: the backend checked, every check, and the kernels the checked steps dispatched. */
    public record Report(String backend, List<Check> checks, Set<String> kernels) {
        public Report {
            checks = List.copyOf(checks);
            kernels = Collections.unmodifiableSet(new TreeSet<>(kernels));
        }

        public boolean passed() {
            return !checks.isEmpty() && checks.stream().allMatch(Check::passed);
        }

        /** One line per check, then the verdict. */
        public String text() {
            StringBuilder sb = new StringBuilder();
            for (Check c : checks) {
                sb.append(c.line()).append('\n');
            }
            if (!kernels.isEmpty()) {
                sb.append("kernels exercised: ")
                        .append(String.join(", ", kernels))
                        .append('\n');
            }
            sb.append(backend)
                    .append(" self-test ")
                    .append(passed() ? "passed" : "FAILED")
                    .append('\n');
            return sb.toString();
        }

        /** The first failed check, for a one-line reason. */
        public String firstFailure() {
            return checks.stream()
                    .filter(c -> !c.passed())
                    .findFirst()
                    .map(Check::line)
                    .orElse("none");
        }
    }

    private SelfTest() {}

    /**
     * The report of a self-test that could not compare anything: bringing the GPU path up failed at
     * {@code step} with {@code message} (which may span lines, as a compiler's does).
     */
    public static Report stopped(String backend, String step, String message) {
        return new Report(backend, List.of(new Check(step, Double.NaN, Double.NaN, message, false)), Set.of());
    }

    /** Runs every built-in case on {@code gpu} (called {@code backend} in the report). */
    public static Report run(String backend, GpuPools gpu) {
        List<Check> checks = new ArrayList<>();
        Set<String> kernels = new TreeSet<>();
        Path dir;
        try {
            dir = Files.createTempDirectory("glimmer-selftest");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        try {
            for (Case c : CASES) {
                Path file = dir.resolve(c.name() + ".gguf");
                ModelSynthesizer.write(SynthModel.of(SynthPreset.TINY, c.weights(), SEED), file, (done, total) -> {});
                try (GlmModel model = GlmModel.open(file)) {
                    DecodeModel shape = DecodeModels.of(model.file(), model.config());
                    DecodeCommandListBuilder.build(shape, TOKENS.length)
                            .dispatches()
                            .forEach(d -> kernels.add(d.kernel()));
                    DecodeCommandListBuilder.build(shape, TOKENS.length, Geometry.PROMPT_TOKENS)
                            .dispatches()
                            .forEach(d -> kernels.add(d.kernel()));
                    checks.add(decode(c, model, gpu));
                    checks.add(prompt(c, model, gpu));
                } finally {
                    Files.deleteIfExists(file);
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } finally {
            dir.toFile().delete();
        }
        return new Report(backend, checks, kernels);
    }

    /** The decode steps of one case on the GPU and on the CPU. */
    static Check decode(Case c, GlmModel model, GpuPools gpu) {
        double worst = 0;
        double worstLimit = 0;
        String where = "";
        try (Reference cpu = new Reference(model, TOKENS.length);
                SequencePool pool = gpu.open(model, TOKENS.length);
                SequencePool.Sequence g = pool.open()) {
            for (int step = 0; step < TOKENS.length; step++) {
                float[] expected = cpu.forward(TOKENS, step, 1).clone();
                SequencePool.Next next = pool.step(List.of(g), new int[] {TOKENS[step]}, new SequencePool.Readout[] {
                    SequencePool.Readout.LOGITS
                })[0];
                float[] got = next.logits();
                double limit = TOLERANCE * range(expected);
                int at = worstLogit(expected, got);
                double error = difference(got[at], expected[at]);
                if (error > worst || where.isEmpty()) {
                    worst = error;
                    worstLimit = limit;
                    where = "at step " + step + ", logit " + at + " (CPU " + expected[at] + ", GPU " + got[at] + ")";
                }
                if (error > limit) {
                    String located = pool instanceof LayerProbe p ? "; " + locate(model, p, g, step) : "";
                    return new Check(
                            c.name() + " decode step",
                            error,
                            limit,
                            "at step " + step + ", logit " + at + " (CPU " + expected[at] + ", GPU " + got[at] + ")"
                                    + located,
                            false);
                }
                int greedy = next.greedyToken();
                if (greedy < 0 || greedy >= got.length || got[greedy] != max(got)) {
                    return new Check(
                            c.name() + " argmax",
                            error,
                            limit,
                            "at step " + step + ": the argmax dispatch chose " + greedy + ", the largest GPU logit is "
                                    + max(got),
                            false);
                }
            }
        }
        return new Check(c.name() + " decode step", worst, worstLimit, where, true);
    }

    /**
     * All the tokens as one prompt from position 0 on the GPU (its prompt command list, in one or more
     * batches) against the CPU's logits after them, and the argmax of the last token.
     */
    static Check prompt(Case c, GlmModel model, GpuPools gpu) {
        try (Reference cpu = new Reference(model, TOKENS.length);
                SequencePool pool = gpu.open(model, TOKENS.length);
                SequencePool.Sequence g = pool.open()) {
            float[] expected = cpu.forward(TOKENS, 0, TOKENS.length).clone();
            SequencePool.Next next = pool.prompt(g, TOKENS, 0, TOKENS.length, SequencePool.Readout.LOGITS);
            float[] got = next.logits();
            double limit = TOLERANCE * range(expected);
            int at = worstLogit(expected, got);
            double error = difference(got[at], expected[at]);
            String where = "after a prompt of " + TOKENS.length + " tokens, logit " + at + " (CPU " + expected[at]
                    + ", GPU " + got[at] + ")";
            if (error > limit) {
                return new Check(c.name() + " prompt", error, limit, where, false);
            }
            int greedy = next.greedyToken();
            if (greedy < 0 || greedy >= got.length || got[greedy] != max(got)) {
                return new Check(
                        c.name() + " prompt argmax",
                        error,
                        limit,
                        "after a prompt of " + TOKENS.length + " tokens: the argmax dispatch chose " + greedy
                                + ", the largest GPU logit is " + max(got),
                        false);
            }
            return new Check(c.name() + " prompt", error, limit, where, true);
        }
    }

    /** The CPU reference: the forward pass with the kernels' float activations over an F32 cache of its own. */
    private static final class Reference implements AutoCloseable {
        final GlmForward forward;
        final KvCache cache;

        Reference(GlmModel model, int capacity) {
            this.forward = new GlmForward(model, new FloatActivationBackend(), GlmForward.DEFAULT_BATCH);
            this.cache =
                    model.newCache(capacity, KvCacheType.GPU); // the GPU's cache type, so that only the kernels differ
        }

        float[] forward(int[] tokens, int from, int count) {
            return forward.forward(cache, tokens, from, count, false);
        }

        @Override
        public void close() {
            cache.close();
        }
    }

    /** The index of the largest difference between the two (a NaN is the largest there is). */
    private static int worstLogit(float[] expected, float[] got) {
        int at = 0;
        double error = 0;
        for (int i = 0; i < expected.length; i++) {
            double d = difference(got[i], expected[i]);
            if (d > error) {
                error = d;
                at = i;
            }
        }
        return at;
    }

    /**
     * Finds the first layer whose output (the residual stream, which the embedding dispatch writes)
     * leaves the CPU's at {@code step}: the GPU re-runs the step up to the end of each layer in turn.
     * Names that layer's kernels, or the output head's when every layer agrees.
     */
    static String locate(GlmModel model, LayerProbe gpu, SequencePool.Sequence sequence, int step) {
        CommandList list = gpu.commandList();
        Dispatch first = list.dispatches().getFirst();
        int xIndex = KernelLibrary.load().kernel(first.kernel()).params().stream()
                .filter(p -> p.name().equals("x") && p.binding() instanceof KernelParam.Buffer)
                .mapToInt(p -> ((KernelParam.Buffer) p.binding()).index())
                .findFirst()
                .orElseThrow(() -> new IllegalStateException(first.kernel() + " has no buffer x"));
        Dispatch.Binding x = first.bindings().stream()
                .filter(b -> b.index() == xIndex)
                .findFirst()
                .orElseThrow();
        int width = model.config().embedding();
        float[][] expected = residuals(model, step);
        int from = 0;
        for (int layer = 0; layer < expected.length; layer++) {
            int end = from;
            for (int i = from; i < list.dispatches().size(); i++) {
                if (list.dispatches().get(i).layer() == layer) {
                    end = i + 1;
                }
            }
            float[] got = gpu.partialStep(sequence, TOKENS[step], step, end, x.buffer(), x.offset(), width);
            double limit = TOLERANCE * maxAbs(expected[layer]);
            int at = 0;
            double error = 0;
            for (int i = 0; i < width; i++) {
                double d = difference(got[i], expected[layer][i]);
                if (d > error) {
                    error = d;
                    at = i;
                }
            }
            if (error > limit) {
                return String.format(
                        Locale.ROOT,
                        "first off after layer %d (kernels %s): max |Δx| %.3g at %d",
                        layer,
                        kernels(list, from, end),
                        error,
                        at);
            }
            from = end;
        }
        return "every layer agrees; off in the output head (kernels "
                + kernels(list, from, list.dispatches().size()) + ")";
    }

    /** The CPU's residual stream after each layer, for the token at {@code step}. */
    private static float[][] residuals(GlmModel model, int step) {
        float[][] out = new float[model.config().layers()][];
        try (Reference cpu = new Reference(model, step + 1)) {
            cpu.forward.setListener((name, layer, rows, width, values) -> {
                if (name.equals("l_out")) {
                    out[layer] = Arrays.copyOfRange(values, (rows - 1) * width, rows * width);
                }
            });
            for (int t = 0; t <= step; t++) {
                cpu.forward(TOKENS, t, 1);
            }
        }
        return out;
    }

    private static String kernels(CommandList list, int from, int to) {
        return list.dispatches().subList(from, to).stream()
                .map(Dispatch::kernel)
                .distinct()
                .collect(Collectors.joining(", "));
    }

    /** |got − expected|, infinite when either is NaN (so the first NaN is the worst place). */
    private static double difference(float got, float expected) {
        double d = Math.abs((double) got - expected);
        return Double.isNaN(d) ? Double.POSITIVE_INFINITY : d;
    }

    private static double maxAbs(float[] v) {
        double m = 0;
        for (float x : v) {
            m = Math.max(m, Math.abs(x));
        }
        return m;
    }

    private static double range(float[] v) {
        float lo = Float.POSITIVE_INFINITY;
        float hi = Float.NEGATIVE_INFINITY;
        for (float x : v) {
            lo = Math.min(lo, x);
            hi = Math.max(hi, x);
        }
        return hi - lo;
    }

    private static float max(float[] v) {
        float m = Float.NEGATIVE_INFINITY;
        for (float x : v) {
            m = Math.max(m, x);
        }
        return m;
    }
}
