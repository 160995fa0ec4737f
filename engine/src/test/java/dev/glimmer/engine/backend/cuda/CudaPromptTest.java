package dev.glimmer.engine.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.commandlist.CommandListPool;
import dev.glimmer.engine.backend.cpu.FloatActivationBackend;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import dev.glimmer.kernels.Geometry;
import java.io.IOException;
import java.util.Random;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The prompt command list as a CUDA graph against the engine's forward pass on the oracle models: a
 * prompt of random tokens long enough for three batches of {@link Geometry#PROMPT_TOKENS} (the last
 * one partly used), then greedy decode steps after it; the logits agree within 1e-3 of the logit range
 * and the argmax picks the reference's token. The same prompt again gives bit-identical logits, and a
 * prompt split into two runs gives the logits of the whole.
 */
class CudaPromptTest {

    private static final double TOLERANCE = 1e-3;
    private static final int STEPS = 8;

    @ParameterizedTest
    @ValueSource(strings = {"tiny-q4_0", "small-q4_k_m", "tiny-f32"})
    void promptBatchesMatchTheForwardPass(String name) throws IOException {
        CudaKernels kernels = CudaTestSupport.kernels();
        int n = 2 * Geometry.PROMPT_TOKENS + 37;
        try (GlmModel model = GlmModel.open(Oracle.model(name))) {
            int[] prompt = new Random(7).ints(n, 0, model.vocabSize()).toArray();
            int context = n + STEPS;
            KvCache cache = model.newCache(context, KvCacheType.GPU);
            GlmForward reference = new GlmForward(model, new FloatActivationBackend(), 64);
            try (CudaWeights weights = new CudaWeights(model, kernels, bytes -> {});
                    CommandListPool pool = CudaTestSupport.pool(weights, 1, context);
                    SequencePool.Sequence gpu = pool.open()) {
                float[] expected =
                        reference.forward(cache, prompt, 0, n, false).clone(); // the reference reuses its array
                SequencePool.Next first = pool.prompt(gpu, prompt, 0, n, SequencePool.Readout.LOGITS);
                float[] got = first.logits().clone();
                int token =
                        Oracle.assertGpuLogits(name + " prompt of " + n, expected, got, first.greedyToken(), TOLERANCE);
                assertEquals(n, gpu.position());
                for (int step = 0; step < STEPS; step++) {
                    float[] e = reference.forward(cache, new int[] {token}, 0, 1, false);
                    SequencePool.Next next = CudaTestSupport.step(pool, gpu, token);
                    token = Oracle.assertGpuLogits(
                            name + " step " + step + " after the prompt",
                            e,
                            next.logits(),
                            next.greedyToken(),
                            TOLERANCE);
                }
                // the same prompt again: bit-identical (a race would show as a difference)
                gpu.truncate(0);
                assertArrayEquals(
                        got,
                        pool.prompt(gpu, prompt, 0, n, SequencePool.Readout.LOGITS)
                                .logits(),
                        name + ": the prompt differs between runs");
                // only the greedy token read back: the same token
                gpu.truncate(0);
                assertEquals(
                        Oracle.argmax(expected, 0, expected.length),
                        pool.prompt(gpu, prompt, 0, n, SequencePool.Readout.GREEDY)
                                .greedyToken(),
                        name + " greedy prompt");
                // split into two runs that do not end on a batch boundary: the logits of the whole
                gpu.truncate(0);
                pool.prompt(gpu, prompt, 0, 5, SequencePool.Readout.LOGITS);
                SequencePool.Next split = pool.prompt(gpu, prompt, 5, n - 5, SequencePool.Readout.LOGITS);
                Oracle.assertGpuLogits(
                        name + " prompt in two runs", expected, split.logits(), split.greedyToken(), TOLERANCE);
            }
        }
    }
}
