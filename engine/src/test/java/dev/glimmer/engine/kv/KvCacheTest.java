package dev.glimmer.engine.kv;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

class KvCacheTest {
    // Opened once for the class, as in the conformance tests: the model is read-only.
    private static GlmModel model;

    @BeforeAll
    static void open() throws Exception {
        model = GlmModel.open(Oracle.model("tiny-f32"));
    }

    @AfterAll
    static void close() {
        model.close();
    }

    @Test
    void rowsRoundTripExactlyInF32AndToNearestHalfInF16() {
        float[] row = new float[80];
        for (int i = 0; i < row.length; i++) {
            row[i] = (float) Math.sin(i * 0.37) * 3.3f;
        }
        float[] ones = new float[80];
        java.util.Arrays.fill(ones, 1f);
        for (KvCacheType type : KvCacheType.values()) {
            try (KvCache cache = new KvCache(3, 80, 16, type)) {
                assertEquals(3L * 16 * 80 * type.bytes, cache.bytes());
                cache.write(2, 15, row, 0);
                float[] acc = new float[80];
                cache.accumulate(2, 15, 1f, acc, 0, 80);
                for (int i = 0; i < 80; i++) {
                    float expected =
                            type == KvCacheType.F32 ? row[i] : Float.float16ToFloat(Float.floatToFloat16(row[i]));
                    assertEquals(expected, acc[i], 0f, type + " value " + i);
                }
                float dot = cache.dot(2, 15, ones, 0);
                float sum = 0;
                for (float v : acc) {
                    sum += v;
                }
                assertEquals(sum, dot, 1e-5f);
            }
        }
    }

    @Test
    void truncatedCacheReusesThePrefixAndGivesTheSameLogits() {
        Oracle.Case chat = Oracle.chatCase("tiny-f32");
        int[] tokens = chat.promptTokens();
        int vocab = model.vocabSize();
        try (KvCache cache = model.newCache(64, KvCacheType.F32)) {
            GlmForward forward = new GlmForward(model, new CpuBackend(), 8);
            forward.forward(cache, new int[] {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 0, 12, false);
            // Keep nothing of that, then the prompt's first 10 tokens; then replace what follows them twice.
            cache.truncate(0);
            forward.forward(cache, tokens, 0, 10, false);
            forward.forward(cache, new int[] {5, 6, 7}, 0, 3, false);
            cache.truncate(10);
            assertEquals(10, cache.size());
            float[] rest = forward.forward(cache, tokens, 10, tokens.length - 10, true);
            for (int p = 10; p < tokens.length; p++) {
                float diff = Oracle.maxAbsDiff(rest, (p - 10) * vocab, chat.promptLogits()[p], vocab);
                assertTrue(diff <= 1e-4, "position " + p + ": |Δ| " + diff);
            }
            assertEquals(tokens.length, cache.size());
        }
    }

    @Test
    void aFullCacheRefusesMoreTokensWithTheNumbers() {
        try (KvCache cache = model.newCache(5, KvCacheType.F16)) {
            GlmForward forward = new GlmForward(model, new CpuBackend(), 4);
            forward.forward(cache, new int[] {1, 2, 3, 4}, 0, 4, false);
            InvalidInputException e = assertThrows(
                    InvalidInputException.class, () -> forward.forward(cache, new int[] {1, 2}, 0, 2, false));
            assertTrue(e.getMessage().contains("4 of 5"), e.getMessage());
            forward.forward(cache, new int[] {1}, 0, 1, false);
            assertEquals(0, cache.remaining());
        }
    }

    @Test
    void contextSizeIsLimitedByTheModel() {
        assertEquals(4096, model.defaultContext(), "tiny's context_length is 4096, below the default 8192");
        InvalidInputException e =
                assertThrows(InvalidInputException.class, () -> model.newCache(4097, KvCacheType.F16));
        assertTrue(e.getMessage().contains("4097") && e.getMessage().contains("4096"), e.getMessage());
        assertThrows(InvalidInputException.class, () -> model.newCache(0, KvCacheType.F16));
    }
}
