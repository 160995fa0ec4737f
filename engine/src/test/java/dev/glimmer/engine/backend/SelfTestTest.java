package dev.glimmer.engine.backend;

import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmModel;
import org.junit.jupiter.api.Test;

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

    /**
     * The CPU backend itself as the "GPU": its Q8_0 rounding of the activations (llama.cpp's CPU
     * numerics) is exactly the kind of deviation the tolerance must notice on the Q4_0 model; on the
     * F32 model there is no rounding and it agrees.
     */
    @Test
    void activationsRoundedToQ8AreReportedWithTheStepAndLogit() {
        SelfTest.Report report = SelfTest.run("rounding", (model, capacity) -> new CpuAsGpu(model, capacity, i -> i));
        assertFalse(report.passed(), report.text());
        SelfTest.Check f32 = report.checks().get(0);
        SelfTest.Check q4 = report.checks().get(1);
        assertTrue(f32.passed(), f32.line());
        assertFalse(q4.passed(), q4.line());
        assertTrue(q4.maxError() > q4.limit(), q4.line());
        assertTrue(q4.line().matches("FAIL tiny-q4_0 decode step: max \\|Δlogit\\| .* at step \\d+, logit \\d+ \\(CPU .*, GPU .*\\)"),
                q4.line());
        assertTrue(report.text().endsWith("rounding self-test FAILED\n"), report.text());
        assertEquals(q4.line(), report.firstFailure());
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
