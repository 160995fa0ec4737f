package dev.glimmer.engine.backend.choice;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.cpu.FloatActivationBackend;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import java.io.IOException;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The CUDA backend as the rest of Glimmer sees it ({@code --backend cuda|auto}): chosen after its
 * self-test against the CPU, then serving sequences whose logits match the CPU's forward pass.
 * GPU tests: skipped, with the reason, where there is no CUDA device.
 */
class CudaBackendTest {

    @BeforeEach
    void needsADevice() {
        Assumptions.assumeTrue(CudaChoice.available(), "GPU test skipped: " + CudaChoice.unavailable());
    }

    @Test
    void selfTestPassesOnEveryBuiltInModel() {
        SelfTest.Report report = Backends.selfTest(BackendKind.CUDA);
        assertTrue(report.passed(), report.text());
        // per built-in model: its decode steps, then its tokens as one prompt (the prompt command list)
        assertEquals(2 * SelfTest.CASES.size(), report.checks().size());
        assertEquals(
                SelfTest.CASES.size(),
                report.checks().stream()
                        .filter(c -> c.name().endsWith(" prompt"))
                        .count());
    }

    @Test
    void cudaAndAutoServeSequencesThatMatchTheCpu() throws IOException {
        String name = "small-q4_k_m";
        try (GlmModel model = GlmModel.open(Oracle.model(name))) {
            for (BackendKind requested : new BackendKind[] {BackendKind.CUDA, BackendKind.AUTO}) {
                try (BackendChoice choice = Backends.choose(requested, model)) {
                    assertEquals("cuda", choice.name(), choice.reason());
                    assertTrue(choice.reason().endsWith("self-test passed"), choice.reason());
                    assertTrue(choice.selfTest().orElseThrow().passed());
                    int[] prompt = Oracle.chatCase(name).promptTokens();
                    // two pools at once on the shared weights, each with its own KV pool
                    try (SequencePool firstPool = choice.pool(1, 64);
                            SequencePool secondPool = choice.pool(1, 32);
                            SequencePool.Sequence first = firstPool.open();
                            SequencePool.Sequence second = secondPool.open();
                            KvCache cache = model.newCache(64, KvCacheType.GPU)) {
                        float[] expected = new GlmForward(model, new FloatActivationBackend(), GlmForward.DEFAULT_BATCH)
                                .forward(cache, prompt, 0, prompt.length, false)
                                .clone();
                        float[] got = firstPool
                                .prompt(first, prompt, 0, prompt.length, SequencePool.Readout.LOGITS)
                                .logits();
                        secondPool.prompt(second, prompt, 0, 3, SequencePool.Readout.LOGITS);
                        float lo = Float.POSITIVE_INFINITY;
                        float hi = Float.NEGATIVE_INFINITY;
                        for (float v : expected) {
                            lo = Math.min(lo, v);
                            hi = Math.max(hi, v);
                        }
                        float range = hi - lo;
                        float diff = Oracle.maxAbsDiff(got, 0, expected, expected.length);
                        assertTrue(
                                diff <= 1e-3 * range,
                                requested + ": max |Δlogit| " + diff + " over a range of " + range);
                        assertEquals(prompt.length, first.position());
                        assertEquals(3, second.position());
                        assertEquals(64, first.capacity());
                    }
                }
            }
        }
    }
}
