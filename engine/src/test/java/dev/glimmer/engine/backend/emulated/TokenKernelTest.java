package dev.glimmer.engine.backend.emulated;

import static dev.glimmer.engine.backend.emulated.KernelTestSupport.*;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.glimmer.engine.tensor.GgmlType;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.Size3;
import dev.glimmer.kernels.emulator.FiberOrder;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.FieldSource;

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
        float[] got = embed(type, table, cols, token, 0, 3);
        for (int i = 0; i < cols; i++) {
            // one rounding of difference at most: the kernel may fuse d * q - m into one multiply-add
            assertEquals(expected[i], got[i], Math.ulp(expected[i]) * 2 + 1e-7f, type + " value " + i);
        }
    }

    /**
     * A chained step's token (PREVIOUS_GREEDY) is its sequence's greedy token, kept at its slot: the row of token 4
     * (kept for slot 2), not of the token the other slots hold.
     */
    @Test
    void aChainedTokenIsItsSequencesGreedyToken() {
        int cols = 256;
        MemorySegment table = randomWeights(GgmlType.Q8_0, 7, cols, new Random(8));
        assertArrayEquals(
                embed(GgmlType.Q8_0, table, cols, 4, 0, 0),
                embed(GgmlType.Q8_0, table, cols, Geometry.PREVIOUS_GREEDY, 2, 4));
    }

    /**
     * embed_row of one token ({@code token}, its sequence in slot {@code slot}) over a greedy token buffer that holds
     * {@code greedy} for slot 2 and 6 for the others.
     */
    private static float[] embed(GgmlType type, MemorySegment table, int cols, int token, int slot, int greedy) {
        return runInBothOrders(
                "embed_row",
                arena -> List.of(
                        args(arena, "EmbedArgs", Map.of("type", type.id, "cols", cols)),
                        args(
                                arena,
                                "StepArgs",
                                Map.of(
                                        "token",
                                        token & 0xFFFF_FFFFL,
                                        "pos",
                                        0,
                                        "kv_len",
                                        1,
                                        "kv_row",
                                        0,
                                        "slot",
                                        slot)),
                        copy(arena, table),
                        arena.allocate(4L * cols),
                        arena.allocateFrom(ValueLayout.JAVA_INT, 6, 6, greedy, 6)),
                3,
                new int[0],
                Size3.of(1),
                Size3.of(WIDE_THREADS));
    }

    /** The two-stage argmax of the decode step (argmax_parts, then argmax) over {@code v}, in order and shuffled. */
    private static int argmax(float[] v, int parts) {
        Map<String, Number> a = Map.of("n", v.length, "parts", parts);
        int[] results = new int[2];
        List<FiberOrder> orders = List.of(FiberOrder.inOrder(), FiberOrder.shuffled(5));
        for (int o = 0; o < orders.size(); o++) {
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment args = args(arena, "ArgmaxArgs", a);
                MemorySegment best = arena.allocate(4L * parts);
                MemorySegment index = arena.allocate(4L * parts);
                MemorySegment result = arena.allocate(4);
                MemorySegment step =
                        args(arena, "StepArgs", Map.of("token", 1, "pos", 9, "kv_len", 10, "kv_row", 30, "slot", 3));
                MemorySegment greedy = arena.allocate(4L * 5);
                int[] scratch = {8 * Geometry.WIDE_SIMDGROUPS};
                emulator()
                        .dispatch(
                                "argmax_parts",
                                List.of(args, floats(arena, v), best, index),
                                scratch,
                                Size3.of(parts),
                                Size3.of(WIDE_THREADS),
                                orders.get(o));
                emulator()
                        .dispatch(
                                "argmax",
                                List.of(args, best, index, result, step, greedy),
                                scratch,
                                Size3.of(1),
                                Size3.of(WIDE_THREADS),
                                orders.get(o));
                results[o] = result.get(ValueLayout.JAVA_INT, 0);
                // kept for the next step of the sequence in slot 3, for a chained step to read
                assertArrayEquals(new int[] {0, 0, 0, results[o], 0}, greedy.toArray(ValueLayout.JAVA_INT));
            }
        }
        assertEquals(results[0], results[1], "in-order and shuffled runs differ");
        return results[0];
    }

    @Test
    void argmaxTakesTheFirstMaximum() {
        Random random = new Random(3);
        float[] v = randomVector(1000, random);
        v[123] = 50f;
        v[777] = 50f;
        v[900] = 49.99f;
        for (int parts : new int[] {1, 3, 8, 128}) { // ties within a slice and across slices; slices left empty
            assertEquals(123, argmax(v, parts), parts + " parts");
        }
        v[5] = 50f;
        assertEquals(5, argmax(v, 8));
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
        assertEquals(expected, argmax(v, Geometry.ARGMAX_PARTS));
    }
}
