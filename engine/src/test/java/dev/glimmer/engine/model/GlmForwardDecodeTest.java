package dev.glimmer.engine.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import java.util.Arrays;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A decode step of several sequences ({@link GlmForward#decode}) gives every sequence exactly the
 * logits that feeding its token alone gives, and advances each cache by one.
 */
class GlmForwardDecodeTest {

    @ParameterizedTest
    @ValueSource(strings = {"tiny-f32", "tiny-q8_0", "tiny-q4_0"})
    void aBatchedStepEqualsOneStepPerSequence(String name) throws Exception {
        try (GlmModel model = GlmModel.open(Oracle.model(name))) {
            int[] prompt = Oracle.chatCase("tiny-f32").promptTokens();
            // Three sequences at different lengths: the whole prompt, a prefix, another prefix.
            int[][] prompts = {prompt, Arrays.copyOf(prompt, 7), Arrays.copyOf(prompt, 15)};
            int[] next = {prompt[3], prompt[20], 5};
            int vocab = model.vocabSize();

            GlmForward batched = new GlmForward(model, new CpuBackend(), 32);
            KvCache[] caches = new KvCache[3];
            for (int s = 0; s < 3; s++) {
                caches[s] = model.newCache(64, KvCacheType.F32);
                batched.forward(caches[s], prompts[s], 0, prompts[s].length, false);
            }
            float[] all = batched.decode(caches, next, 3);

            GlmForward single = new GlmForward(model, new CpuBackend(), 32);
            for (int s = 0; s < 3; s++) {
                try (KvCache cache = model.newCache(64, KvCacheType.F32)) {
                    single.forward(cache, prompts[s], 0, prompts[s].length, false);
                    float[] alone = single.forward(cache, new int[] {next[s]}, 0, 1, false);
                    assertArrayEquals(
                            alone, Arrays.copyOfRange(all, s * vocab, (s + 1) * vocab), name + " sequence " + s);
                    assertEquals(cache.size(), caches[s].size());
                }
            }
            for (KvCache cache : caches) {
                cache.close();
            }
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"tiny-f32"})
    void aFullCacheOrASharedCacheIsRefused(String name) throws Exception {
        try (GlmModel model = GlmModel.open(Oracle.model(name));
                KvCache small = model.newCache(2, KvCacheType.F32)) {
            GlmForward forward = new GlmForward(model, new CpuBackend(), 4);
            forward.forward(small, new int[] {1, 2}, 0, 2, false);
            assertThrows(InvalidInputException.class, () -> forward.decode(new KvCache[] {small}, new int[] {3}, 1));
            try (KvCache other = model.newCache(8, KvCacheType.F32)) {
                assertThrows(
                        IllegalArgumentException.class,
                        () -> forward.decode(new KvCache[] {other, other}, new int[] {3, 4}, 2));
            }
        }
    }
}
