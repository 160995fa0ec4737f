package dev.glimmer.engine.backend.choice;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.SequenceSlots;
import dev.glimmer.engine.backend.commandlist.DecodeModels;
import dev.glimmer.engine.backend.commandlist.LayerProbe;
import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.backend.cpu.FloatActivationBackend;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.Backend;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.decode.CommandList;
import dev.glimmer.kernels.decode.DecodeCommandListBuilder;
import dev.glimmer.kernels.decode.DecodeModel;
import dev.glimmer.kernels.decode.Dispatch;
import java.io.IOException;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.IntUnaryOperator;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * The self-test on the emulated GPU path (the real kernels and command list on the CPU emulator),
 * and on stand-ins that are wrong in known ways, which it must report.
 */
class SelfTestTest {

    @Test
    void theKernelsOnTheEmulatorPassOnTheBuiltInModels() {
        SelfTest.Report report = Backends.selfTest(BackendKind.EMULATED);
        assertTrue(report.passed(), report.text());
        assertEquals(2 * SelfTest.CASES.size(), report.checks().size()); // the decode steps and the prompt of each
        for (SelfTest.Check c : report.checks()) {
            assertTrue(c.maxError() > 0 && c.maxError() <= c.limit(), c.line());
        }
        assertTrue(report.text().endsWith("emulated self-test passed\n"), report.text());
    }

    /** The built-in models dispatch every kernel the decode step and the prompt list of another model shape use. */
    @Test
    void theBuiltInModelsExerciseEveryKernelOfTheDecodeStep() throws IOException {
        Set<String> used = new TreeSet<>();
        try (GlmModel model = GlmModel.open(Oracle.model("small-q4_k_m"))) {
            DecodeModel shape = DecodeModels.of(model.file(), model.config());
            DecodeCommandListBuilder.build(shape, 16).dispatches().forEach(d -> used.add(d.kernel()));
            DecodeCommandListBuilder.build(shape, 16, Geometry.PROMPT_TOKENS)
                    .dispatches()
                    .forEach(d -> used.add(d.kernel()));
        }
        SelfTest.Report report =
                SelfTest.run("stand-in", (model, capacity) -> new CpuAsGpu(model, capacity, i -> i, -1));
        assertEquals(used, report.kernels());
        assertTrue(report.text().contains("kernels exercised: " + String.join(", ", used) + "\n"), report.text());
    }

    /**
     * The CPU backend itself as the "GPU": its rounding of the activations to Q8_0 before Q8_0/Q4_0
     * products (llama.cpp's CPU numerics) is exactly the kind of deviation the tolerance must notice;
     * F32 products round nothing, and F16's rounding (2^-11 relative) stays within the tolerance.
     */
    @Test
    void activationsRoundedToQ8AreReportedWithTheStepAndLogit() {
        SelfTest.Report report =
                SelfTest.run("rounding", (model, capacity) -> new CpuAsGpu(model, capacity, i -> i, -1));
        assertFalse(report.passed(), report.text());
        List<SelfTest.Check> checks = report.checks();
        // per case the decode steps, then the prompt: f32 and f16 pass, q8_0 and q4_0 fail both
        assertEquals(
                List.of(true, true, true, true, false, false, false, false),
                checks.stream().map(SelfTest.Check::passed).toList(),
                report.text());
        for (SelfTest.Check c : checks.subList(4, 8)) {
            assertTrue(c.maxError() > c.limit(), c.line());
        }
        for (int i : new int[] {4, 6}) {
            assertTrue(
                    checks.get(i)
                            .line()
                            .matches(
                                    "FAIL tiny-q[48]_0 decode step: max \\|Δlogit\\| .* at step \\d+, logit \\d+ \\(CPU .*, GPU .*\\)"),
                    checks.get(i).line());
            assertTrue(
                    checks.get(i + 1)
                            .line()
                            .matches(
                                    "FAIL tiny-q[48]_0 prompt: max \\|Δlogit\\| .* after a prompt of 8 tokens, logit \\d+ \\(CPU .*, GPU .*\\)"),
                    checks.get(i + 1).line());
        }
        assertTrue(report.text().endsWith("rounding self-test FAILED\n"), report.text());
        assertEquals(checks.get(4).line(), report.firstFailure());
    }

    @Test
    void anArgmaxThatMissesTheLargestLogitIsReported() {
        SelfTest.Report report = SelfTest.run(
                "bad-argmax",
                (model, capacity) -> new CpuAsGpu(model, capacity, top -> (top + 1) % model.vocabSize(), -1));
        assertFalse(report.passed());
        assertTrue(report.checks().get(0).line().startsWith("FAIL tiny-f32 argmax"), report.text());
        assertTrue(report.checks().get(0).where().contains("at step 0: the argmax dispatch chose"), report.text());
    }

    /** A NaN is the worst difference there is, and the report points at it. */
    @Test
    void aNanLogitIsReportedWhereItIs() {
        SelfTest.Report report = SelfTest.run("nan", (model, capacity) -> new CpuAsGpu(model, capacity, i -> i, 77));
        SelfTest.Check f32 = report.checks().getFirst();
        assertFalse(f32.passed());
        assertEquals(Double.POSITIVE_INFINITY, f32.maxError());
        assertTrue(f32.where().startsWith("at step 0, logit 77 (CPU "), f32.where());
        assertTrue(f32.where().endsWith(", GPU NaN)"), f32.where());
    }

    /** A "GPU" whose layer 1 is wrong: the report names that layer and its kernels. */
    @Test
    void aWrongLayerIsLocatedWithItsKernels() throws IOException {
        SelfTest.Report report = SelfTest.run("broken-layer", (model, capacity) -> new BrokenLayer(model, capacity, 1));
        assertFalse(report.passed(), report.text());
        String layerOne;
        try (GlmModel model = GlmModel.open(Oracle.model("tiny-q4_0"))) {
            layerOne =
                    DecodeCommandListBuilder.build(DecodeModels.of(model.file(), model.config()), 8)
                            .dispatches()
                            .stream()
                            .filter(d -> d.layer() == 1)
                            .map(Dispatch::kernel)
                            .distinct()
                            .collect(Collectors.joining(", "));
        }
        for (SelfTest.Check c : report.checks().stream()
                .filter(c -> c.name().endsWith("decode step"))
                .toList()) {
            assertFalse(c.passed(), c.line());
            assertTrue(c.where().startsWith("at step 0, logit "), c.line());
            assertTrue(c.where().contains("; first off after layer 1 (kernels " + layerOne + "): max |Δx| "), c.line());
        }
        assertEquals(
                "mat_vec_pair, mat_vec, mla_rope_cache, mla_attention, mla_merge_latent, moe_router, moe_gate_up, moe_down",
                layerOne);
        assertTrue(
                report.checks().stream().noneMatch(SelfTest.Check::passed),
                "the prompts fail as well: " + report.text());
    }

    /**
     * The CPU's forward pass posing as a GPU pool of one sequence: its logits are the CPU's (as {@link #logits} leaves
     * them) and its "argmax dispatch" answers {@link #argmax} of their first maximum.
     */
    private abstract static class CpuPosingAsGpu implements SequencePool {
        final GlmModel model;
        final GlmForward forward;
        private final SequenceSlots slots;
        private KvCache cache;

        CpuPosingAsGpu(GlmModel model, int capacity, Backend backend) {
            this.model = model;
            this.forward = new GlmForward(model, backend, GlmForward.DEFAULT_BATCH);
            this.slots = new SequenceSlots(1, capacity, freed -> cache.close());
        }

        // The self-test moves no KV rows.
        @Override
        public long bytesPerPosition() {
            throw new UnsupportedOperationException();
        }

        @Override
        public String kvLayout() {
            throw new UnsupportedOperationException();
        }

        @Override
        public void exportPrefix(Sequence sequence, int n, java.lang.foreign.MemorySegment into) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void importPrefix(Sequence sequence, java.lang.foreign.MemorySegment from, int n) {
            throw new UnsupportedOperationException();
        }

        /** The logits this stand-in returns, from the CPU's (which it may change in place). */
        float[] logits(float[] cpuLogits) {
            return cpuLogits;
        }

        /** The token the argmax dispatch answers when {@code top} is the first maximum. */
        int argmax(int top) {
            return top;
        }

        @Override
        public Sequence open() {
            SequenceSlots.Slot slot = slots.open();
            cache = model.newCache(slots.capacity(), KvCacheType.GPU);
            return slot;
        }

        @Override
        public Next prompt(Sequence sequence, int[] tokens, int from, int count, Readout readout) {
            SequenceSlots.Slot slot = slots.own(sequence);
            float[] logits = logits(forward.forward(cache, tokens, from, count, false));
            slot.advance(count);
            int top = 0;
            for (int i = 1; i < logits.length; i++) {
                if (logits[i] > logits[top]) {
                    top = i;
                }
            }
            return new Next(logits, argmax(top));
        }

        @Override
        public Launched launch(List<Sequence> sequences, int[] tokens, Readout[] readouts) {
            Next next = prompt(sequences.getFirst(), tokens, 0, 1, readouts[0]);
            return () -> new Next[] {next};
        }

        @Override
        public float[] promptLogits(Sequence sequence, int[] tokens, int from, int count) {
            throw new UnsupportedOperationException();
        }

        @Override
        public int slots() {
            return 1;
        }

        @Override
        public int capacity() {
            return slots.capacity();
        }

        @Override
        public long bytesPerSequence() {
            return 0;
        }

        @Override
        public int inUse() {
            return slots.inUse();
        }

        @Override
        public long bytes() {
            return 0;
        }

        @Override
        public void close() {}
    }

    /** Scales the output of layer {@code bad} by 1.1 (the pass goes on with it); shows layer {@code capture}'s in {@code into}. */
    private static void breakLayer(GlmForward forward, int bad, float[][] into, int capture) {
        forward.setListener((name, layer, rows, width, values) -> {
            if (name.equals("l_out") && layer == bad) {
                for (int i = 0; i < rows * width; i++) {
                    values[i] *= 1.1f;
                }
            }
            if (name.equals("l_out") && layer == capture) {
                into[0] = Arrays.copyOfRange(values, (rows - 1) * width, rows * width);
            }
        });
    }

    /**
     * The CPU forward pass with the kernels' numerics, except that the output of layer {@code bad} is
     * scaled by 1.1 (the pass goes on with it), as a GPU with a broken kernel in that layer would.
     * Partial steps re-run the pass from the start and show the residual after the last dispatch's layer.
     */
    private static final class BrokenLayer extends CpuPosingAsGpu implements LayerProbe {
        private final int bad;
        private final CommandList list;

        BrokenLayer(GlmModel model, int capacity, int bad) {
            super(model, capacity, new FloatActivationBackend());
            this.bad = bad;
            this.list = DecodeCommandListBuilder.build(DecodeModels.of(model.file(), model.config()), capacity);
            breakLayer(forward, bad, new float[1][], -1);
        }

        @Override
        public CommandList commandList() {
            return list;
        }

        @Override
        public float[] partialStep(
                Sequence sequence, int token, int position, int dispatches, int buffer, long offset, int count) {
            assertEquals(SelfTest.TOKENS[position], token);
            assertEquals(model.config().embedding(), count);
            float[][] capture = new float[1][];
            GlmForward again = new GlmForward(model, new FloatActivationBackend(), 1);
            breakLayer(
                    again, bad, capture, list.dispatches().get(dispatches - 1).layer());
            try (KvCache c = model.newCache(position + 1, KvCacheType.GPU)) {
                for (int t = 0; t <= position; t++) {
                    again.forward(c, SelfTest.TOKENS, t, 1, false);
                }
            }
            return capture[0];
        }
    }

    /**
     * The CPU posing as a GPU; its "argmax dispatch" answers {@code argmax} of the true top token, and logit
     * {@code nanAt} (unless -1) is NaN.
     */
    private static final class CpuAsGpu extends CpuPosingAsGpu {
        private final IntUnaryOperator argmax;
        private final int nanAt;

        CpuAsGpu(GlmModel model, int capacity, IntUnaryOperator argmax, int nanAt) {
            super(model, capacity, new CpuBackend());
            this.argmax = argmax;
            this.nanAt = nanAt;
        }

        @Override
        float[] logits(float[] cpuLogits) {
            float[] logits = cpuLogits.clone();
            if (nanAt >= 0) {
                logits[nanAt] = Float.NaN;
            }
            return logits;
        }

        @Override
        int argmax(int top) {
            return argmax.applyAsInt(top);
        }
    }
}
