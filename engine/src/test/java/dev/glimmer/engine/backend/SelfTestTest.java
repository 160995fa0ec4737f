package dev.glimmer.engine.backend;

import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.backend.emulated.DecodeModels;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import dev.glimmer.kernels.decode.DecodeCommandListBuilder;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.IntUnaryOperator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The self-test on the emulated GPU path (the real kernels and command list on the CPU emulator),
 * and on stand-ins that are wrong in known ways, which it must report.
 */
class SelfTestTest {

    @Test
    void theKernelsOnTheEmulatorPassOnTheBuiltInModels() {
        SelfTest.Report report = Backends.selfTest("emulated");
        assertTrue(report.passed(), report.text());
        assertEquals(SelfTest.CASES.size(), report.checks().size());
        for (SelfTest.Check c : report.checks()) {
            assertTrue(c.maxError() > 0 && c.maxError() <= c.limit(), c.line());
        }
        assertTrue(report.text().endsWith("emulated self-test passed\n"), report.text());
    }

    /** The built-in models dispatch every kernel the decode step of another model shape uses. */
    @Test
    void theBuiltInModelsExerciseEveryKernelOfTheDecodeStep() throws IOException {
        Set<String> used = new TreeSet<>();
        try (GlmModel model = GlmModel.open(Oracle.model("small-q4_k_m"))) {
            DecodeCommandListBuilder.build(DecodeModels.of(model.file(), model.config()), 16).dispatches()
                    .forEach(d -> used.add(d.kernel()));
        }
        SelfTest.Report report = SelfTest.run("stand-in", (model, capacity) -> new CpuAsGpu(model, capacity, i -> i));
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
        SelfTest.Report report = SelfTest.run("rounding", (model, capacity) -> new CpuAsGpu(model, capacity, i -> i));
        assertFalse(report.passed(), report.text());
        List<SelfTest.Check> checks = report.checks();
        assertEquals(List.of(true, true, false, false), checks.stream().map(SelfTest.Check::passed).toList(), report.text());
        for (SelfTest.Check c : checks.subList(2, 4)) {
            assertTrue(c.maxError() > c.limit(), c.line());
            assertTrue(c.line().matches("FAIL tiny-q[48]_0 decode step: max \\|Δlogit\\| .* at step \\d+, logit \\d+ \\(CPU .*, GPU .*\\)"),
                    c.line());
        }
        assertTrue(report.text().endsWith("rounding self-test FAILED\n"), report.text());
        assertEquals(checks.get(2).line(), report.firstFailure());
    }

    @Test
    void anArgmaxThatMissesTheLargestLogitIsReported() {
        SelfTest.Report report = SelfTest.run("bad-argmax",
                (model, capacity) -> new CpuAsGpu(model, capacity, top -> (top + 1) % model.vocabSize()));
        assertFalse(report.passed());
        assertTrue(report.checks().get(0).line().startsWith("FAIL tiny-f32 argmax"), report.text());
        assertTrue(report.checks().get(0).where().contains("at step 0: the argmax dispatch chose"), report.text());
    }

    /** A CPU decoder posing as a GPU one; its "argmax dispatch" answers {@code argmax} of the true top token. */
    private static final class CpuAsGpu implements GpuTokenDecoder {
        private final CpuDecoder cpu;
        private final IntUnaryOperator argmax;
        private int top;

        CpuAsGpu(GlmModel model, int capacity, IntUnaryOperator argmax) {
            this.cpu = new CpuDecoder(model, capacity, KvCacheType.F32, new CpuBackend());
            this.argmax = argmax;
        }

        @Override
        public float[] forward(int[] tokens, int from, int count) {
            float[] logits = cpu.forward(tokens, from, count);
            top = 0;
            for (int i = 1; i < logits.length; i++) {
                if (logits[i] > logits[top]) {
                    top = i;
                }
            }
            return logits;
        }

        @Override
        public int greedyToken() {
            return argmax.applyAsInt(top);
        }

        @Override
        public int position() {
            return cpu.position();
        }

        @Override
        public int capacity() {
            return cpu.capacity();
        }

        @Override
        public void close() {
            cpu.close();
        }
    }
}
