package dev.glimmer.engine.backend.emulated;

import dev.glimmer.engine.backend.FloatActivationBackend;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import dev.glimmer.kernels.emulator.FiberOrder;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The whole decode step on the emulator against the engine's forward pass on the oracle models:
 * the chat prompt fed token by token, then a 32-token greedy run; at every step the logits agree
 * within 1e-3 of the logit range and the argmax dispatch picks the same token.
 */
class EmulatedDecodeTest {

    private static final int GREEDY = 32;
    private static final double TOLERANCE = 1e-3;

    /** The greedy tokens of the run, after checking every step against the float reference. */
    private static int[] run(String name, FiberOrder order) throws IOException {
        try (GlmModel model = GlmModel.open(Oracle.model(name))) {
            int[] prompt = Oracle.chatCase(name).promptTokens();
            int context = prompt.length + GREEDY;
            KvCache cache = model.newCache(context, KvCacheType.F32);
            GlmForward reference = new GlmForward(model, new FloatActivationBackend(), 1);
            int[] greedy = new int[GREEDY];
            try (EmulatedDecoder gpu = new EmulatedDecoder(model, context, order)) {
                int token = prompt[0];
                for (int step = 0; step < prompt.length + GREEDY - 1; step++) {
                    float[] expected = reference.forward(cache, new int[] {token}, 0, 1, false);
                    float[] got = gpu.step(token);
                    float range = Oracle.range(expected);
                    float diff = Oracle.maxAbsDiff(got, 0, expected, expected.length);
                    assertTrue(diff <= TOLERANCE * range, name + " step " + step + ": max |Δlogit| " + diff
                            + " > " + TOLERANCE + " × range " + range);
                    int next = Oracle.argmax(expected, 0, expected.length);
                    assertEquals(next, gpu.greedyToken(), name + " step " + step + ": greedy token");
                    if (step >= prompt.length - 1) {
                        greedy[step - prompt.length + 1] = next;
                    }
                    token = step + 1 < prompt.length ? prompt[step + 1] : next;
                }
            }
            return greedy;
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"tiny-q8_0", "tiny-q4_0", "small-q4_k_m"})
    void decodeStepMatchesTheForwardPass(String name) throws IOException {
        run(name, FiberOrder.inOrder());
    }

    /** On the F32 model (here with the fibers shuffled) the float path is llama.cpp's: the greedy run is the oracle's. */
    @Test
    void tinyF32GreedyRunIsLlamaCpps() throws IOException {
        int[] greedy = run("tiny-f32", FiberOrder.shuffled(5));
        assertArrayEquals(Oracle.chatCase("tiny-f32").greedyTokens(), greedy);
    }
}
