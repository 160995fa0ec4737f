package dev.glimmer.engine.backend.emulated;

import dev.glimmer.engine.tensor.GgmlType;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.Size3;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.FieldSource;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Map;
import java.util.Random;

import static dev.glimmer.engine.backend.emulated.KernelTestSupport.*;
import static org.junit.jupiter.api.Assertions.assertEquals;

/** Embedding row lookup and greedy argmax. */
class TokenKernelTest {

    private static final int WIDE_THREADS = Geometry.WIDE_SIMDGROUPS * 32;
    static final List<GgmlType> EMBEDDING_TYPES = TYPES;

    @ParameterizedTest
    @FieldSource("EMBEDDING_TYPES")
    void embeddingRowIsTheDequantizedRow(GgmlType type) {
        int vocab = 7;
        int cols = 512;
        int token = 5;
        MemorySegment table = randomWeights(type, vocab, cols, new Random(type.id));
        float[] expected = dequantizedRow(table, type, token, cols);
        float[] got = runInBothOrders("embed_row", arena -> List.of(args(arena, "EmbedArgs", Map.of("type", type.id, "cols", cols)),
                        args(arena, "StepArgs", Map.of("token", token, "pos", 0, "kv_len", 1)), copy(arena, table),
                        arena.allocate(4L * cols)),
                3, new int[0], Size3.of(1), Size3.of(WIDE_THREADS));
        for (int i = 0; i < cols; i++) {
            // one rounding of difference at most: the kernel may fuse d * q - m into one multiply-add
            assertEquals(expected[i], got[i], Math.ulp(expected[i]) * 2 + 1e-7f, type + " value " + i);
        }
    }

    private static int argmax(float[] v) {
        float[] result = runInBothOrders("argmax", arena -> List.of(args(arena, "ArgmaxArgs", Map.of("n", v.length)),
                floats(arena, v), arena.allocate(4)), 2, new int[] {8 * Geometry.WIDE_SIMDGROUPS}, Size3.of(1),
                Size3.of(WIDE_THREADS));
        return Float.floatToRawIntBits(result[0]);
    }

    @Test
    void argmaxTakesTheFirstMaximum() {
        Random random = new Random(3);
        float[] v = randomVector(1000, random);
        v[123] = 50f;
        v[777] = 50f;
        v[900] = 49.99f;
        assertEquals(123, argmax(v));
        v[5] = 50f;
        assertEquals(5, argmax(v));
    }

    /** Over GLM-4.7-Flash's vocabulary of 154,880. */
    @Test
    void argmaxRealVocabulary() {
        Random random = new Random(4);
        float[] v = randomVector(154880, random);
        int expected = 0;
        for (int i = 1; i < v.length; i++) {
            if (v[i] > v[expected]) {
                expected = i;
            }
        }
        assertEquals(expected, argmax(v));
    }
}
