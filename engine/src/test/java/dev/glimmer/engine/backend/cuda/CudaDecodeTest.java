package dev.glimmer.engine.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.commandlist.CommandListPool;
import dev.glimmer.engine.backend.cpu.FloatActivationBackend;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import dev.glimmer.kernels.decode.BufferSpec;
import dev.glimmer.kernels.decode.CommandList;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The whole decode step as a CUDA graph against the engine's forward pass (with the kernels'
 * float numerics) on the oracle models: the chat prompt fed token by token, then a 32-token greedy
 * run; at every step the logits agree within 1e-3 of the logit range and the argmax dispatch picks
 * the reference's token. A second run of the same tokens must give bit-identical logits (a race
 * between threads or blocks would show as a difference), and so must step 0 re-run dispatch by
 * dispatch after the whole run.
 */
class CudaDecodeTest {

    private static final int GREEDY = 32;
    private static final double TOLERANCE = 1e-3;

    private record Run(int[] greedy, List<float[]> logits) {}

    // EmulatedDecodeTest's run on the device: the reference and the checks are the same, the decoder differs.
    private static Run run(String name) throws IOException {
        CudaKernels kernels = CudaTestSupport.kernels();
        try (GlmModel model = GlmModel.open(Oracle.model(name))) {
            int[] prompt = Oracle.chatCase(name).promptTokens();
            int context = prompt.length + GREEDY;
            KvCache cache = model.newCache(context, KvCacheType.GPU);
            GlmForward reference = new GlmForward(model, new FloatActivationBackend(), 1);
            int[] greedy = new int[GREEDY];
            List<float[]> all = new ArrayList<>();
            try (CudaWeights weights = new CudaWeights(model, kernels, bytes -> {});
                    CommandListPool pool = CudaTestSupport.pool(weights, 1, context);
                    SequencePool.Sequence gpu = pool.open()) {
                int token = prompt[0];
                for (int step = 0; step < prompt.length + GREEDY - 1; step++) {
                    float[] expected = reference.forward(cache, new int[] {token}, 0, 1, false);
                    SequencePool.Next next1 = CudaTestSupport.step(pool, gpu, token);
                    float[] got = next1.logits();
                    all.add(got.clone()); // the pool reuses its logits array
                    float range = Oracle.range(expected);
                    float diff = Oracle.maxAbsDiff(got, 0, expected, expected.length);
                    assertTrue(
                            diff <= TOLERANCE * range,
                            name + " step " + step + ": max |Δlogit| " + diff + " > " + TOLERANCE + " × range "
                                    + range);
                    int next = Oracle.argmax(expected, 0, expected.length);
                    assertEquals(next, next1.greedyToken(), name + " step " + step + ": greedy token");
                    if (step >= prompt.length - 1) {
                        greedy[step - prompt.length + 1] = next;
                    }
                    token = step + 1 < prompt.length ? prompt[step + 1] : next;
                }
                // the same tokens again from position 0: every logit bit-identical
                gpu.truncate(0);
                token = prompt[0];
                for (int step = 0; step < prompt.length + GREEDY - 1; step++) {
                    assertArrayEquals(
                            all.get(step),
                            CudaTestSupport.step(pool, gpu, token).logits(),
                            name + " step " + step + " differs between runs");
                    token = step + 1 < prompt.length ? prompt[step + 1] : greedy[step - prompt.length + 1];
                }
                // a step re-run at an earlier position (dispatch by dispatch, no graph) gives its logits again
                CommandList list = pool.commandList();
                int activations = list.buffer(BufferSpec.Kind.ACTIVATIONS);
                float[] rerun = pool.partialStep(
                        gpu, prompt[0], 0, list.dispatches().size(), activations, list.logits(), all.get(0).length);
                assertArrayEquals(all.get(0), rerun, name + ": step 0 re-run");
            }
            return new Run(greedy, all);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"tiny-q8_0", "tiny-q4_0", "small-q4_k_m"})
    void decodeStepMatchesTheForwardPass(String name) throws IOException {
        run(name);
    }

    /** On the F32 model the float path is llama.cpp's: the greedy run is the oracle's. */
    @Test
    void tinyF32GreedyRunIsLlamaCpps() throws IOException {
        assertArrayEquals(
                Oracle.chatCase("tiny-f32").greedyTokens(), run("tiny-f32").greedy());
    }
}
