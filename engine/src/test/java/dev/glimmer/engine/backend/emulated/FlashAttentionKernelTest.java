package dev.glimmer.engine.backend.emulated;

import static dev.glimmer.engine.backend.emulated.KernelTestSupport.*;

import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.Size3;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The prompt list's attention on the matrix units (mla_flash_attention) against the attention of docs/MODEL.md §4
 * in double and against the split attention it replaces there (mla_attention and mla_merge_latent, which the decode
 * step and the batch decode lists keep), on random queries and cache rows: a batch continuing a cached prefix, in a
 * range of the KV pool that does not start at row 0, whose last tokens are unused and whose query rows (tokens x heads)
 * are not a multiple of the threadgroup's, with NaN in every cache row no token may read. The cache holds halves:
 * tightly against the reference over those halves (the kernel's arithmetic: queries and probabilities as hi and lo
 * halves, two products per value), and within the numerics policy's normalized error against the reference over the
 * float rows before rounding (what F16 storage costs).
 */
class FlashAttentionKernelTest {

    /** Of the output's magnitude (the values are of magnitude ~1): the hi and lo halves keep ~22 bits of the float operands. */
    private static final double TOLERANCE = 2e-5;
    /** KV pool rows before the sequence's range. */
    private static final int KV_ROW = 3;

    private static void check(int heads, int latent, int rope, int prefix, int tokens, int active, long seed) {
        Random random = new Random(seed);
        int row = latent + rope;
        float scale = (float) (1 / Math.sqrt(latent / 2.0));
        float[] q = randomVector(tokens * heads * row, random);
        int rows = KV_ROW + prefix + tokens + 2;
        float[] floatCache = new float[rows * row];
        Arrays.fill(floatCache, Float.NaN); // only the rows of the prefix and of the active tokens may be read
        float[] written = randomVector((prefix + active) * row, random);
        System.arraycopy(written, 0, floatCache, KV_ROW * row, written.length);
        double[] unrounded = reference(heads, latent, rope, tokens, active, prefix, q, floatCache, scale);
        float[] cache = toHalves(floatCache); // as the cache holds them
        double[] expected = reference(heads, latent, rope, tokens, active, prefix, q, cache, scale);
        double[] magnitude = new double[expected.length];
        Arrays.fill(magnitude, 1);

        Map<String, Number> flashArgs =
                Map.of("heads", heads, "latent", latent, "rope", rope, "tokens", tokens, "scale", scale);
        float[] noOutput = new float[tokens * heads * latent];
        Arrays.fill(noOutput, -7); // the unused tokens' rows stay as they are
        int blocks = (tokens * heads + Geometry.FA_QUERIES - 1) / Geometry.FA_QUERIES;
        float[] noPartials = new float[Geometry.FA_SPLITS * tokens * heads * (latent + 2)];
        List<float[]> attended = runInBothOrders(
                "mla_flash_attention",
                arena -> List.of(
                        args(arena, "FlashAttentionArgs", flashArgs),
                        steps(arena, tokens, active, prefix),
                        floats(arena, q),
                        halves(arena, cache),
                        floats(arena, noOutput),
                        floats(arena, noPartials)),
                new int[] {4 * Geometry.faMemoryFloats()},
                new Size3(blocks, Geometry.FA_SPLITS, 1),
                Size3.of(Geometry.FA_SIMDGROUPS * 32),
                4,
                5);
        // the blocks of rows whose keys were split into parts: the parts merged
        float[] tiles = runInBothOrders(
                "mla_flash_merge",
                arena -> List.of(
                        args(arena, "FlashAttentionArgs", flashArgs),
                        steps(arena, tokens, active, prefix),
                        floats(arena, attended.get(1)),
                        floats(arena, attended.get(0))),
                3,
                new int[0],
                new Size3(blocks, Geometry.FA_QUERIES / Geometry.WIDE_SIMDGROUPS, 1),
                Size3.of(Geometry.WIDE_SIMDGROUPS * 32));
        int used = active * heads * latent;
        assertClose(
                Arrays.copyOf(expected, used), magnitude, Arrays.copyOf(tiles, used), TOLERANCE, "attention on tiles");
        assertNmse(
                Arrays.copyOf(unrounded, used),
                Arrays.copyOf(tiles, used),
                "attention on tiles against the float cache");
        for (int i = used; i < tiles.length; i++) {
            if (tiles[i] != -7) {
                throw new AssertionError("value " + i + " of an unused token was written: " + tiles[i]);
            }
        }

        // the split attention of the decode step with a token dimension, as the prompt list ran it before
        int splits = Geometry.BATCH_MIN_ATTENTION_SPLITS;
        float[] split;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment stepArgs = steps(arena, tokens, active, prefix);
            MemorySegment partials = arena.allocate(4L * tokens * splits * heads * (latent + 2), 16);
            MemorySegment lat = floats(arena, noOutput);
            emulator()
                    .dispatch(
                            "mla_attention",
                            List.of(
                                    args(
                                            arena,
                                            "AttentionArgs",
                                            Map.of(
                                                    "heads", heads, "latent", latent, "rope", rope, "splits", splits,
                                                    "scale", scale)),
                                    stepArgs,
                                    floats(arena, q),
                                    halves(arena, cache),
                                    partials),
                            new int[0],
                            Size3.of(tokens, splits),
                            Size3.of(Geometry.WIDE_SIMDGROUPS * 32),
                            dev.glimmer.kernels.emulator.FiberOrder.inOrder());
            emulator()
                    .dispatch(
                            "mla_merge_latent",
                            List.of(
                                    args(
                                            arena,
                                            "MergeArgs",
                                            Map.of("heads", heads, "latent", latent, "splits", splits, "parts", 1)),
                                    stepArgs,
                                    partials,
                                    lat),
                            new int[] {4 * (Geometry.WIDE_SIMDGROUPS * 32 + Geometry.WIDE_SIMDGROUPS + splits)},
                            new Size3(tokens, heads, 1),
                            Size3.of(Geometry.WIDE_SIMDGROUPS * 32),
                            dev.glimmer.kernels.emulator.FiberOrder.inOrder());
            split = lat.toArray(ValueLayout.JAVA_FLOAT);
        }
        double[] splitValues = new double[split.length];
        for (int i = 0; i < split.length; i++) {
            splitValues[i] = split[i];
        }
        assertClose(splitValues, magnitude, tiles, TOLERANCE, "attention on tiles against the split attention");
    }

    /** The attention of the active tokens' query rows over the cache rows they see, in double (KV_ROW on). */
    private static double[] reference(
            int heads,
            int latent,
            int rope,
            int tokens,
            int active,
            int prefix,
            float[] q,
            float[] cache,
            float scale) {
        int row = latent + rope;
        double[] expected = new double[tokens * heads * latent];
        for (int t = 0; t < active; t++) {
            int keys = prefix + t + 1;
            for (int h = 0; h < heads; h++) {
                int query = t * heads + h;
                double[] p = new double[keys];
                double max = Double.NEGATIVE_INFINITY;
                for (int u = 0; u < keys; u++) {
                    double d = 0;
                    for (int i = 0; i < row; i++) {
                        d += (double) q[query * row + i] * cache[(KV_ROW + u) * row + i];
                    }
                    p[u] = d * scale;
                    max = Math.max(max, p[u]);
                }
                double sum = 0;
                for (int u = 0; u < keys; u++) {
                    p[u] = Math.exp(p[u] - max);
                    sum += p[u];
                }
                for (int c = 0; c < latent; c++) {
                    double v = 0;
                    for (int u = 0; u < keys; u++) {
                        v += p[u] / sum * cache[(KV_ROW + u) * row + c];
                    }
                    expected[query * latent + c] = v;
                }
            }
        }
        return expected;
    }

    /** StepArgs of a batch after {@code prefix} cached rows: the first {@code active} tokens at their positions. */
    private static MemorySegment steps(Arena arena, int tokens, int active, int prefix) {
        var struct = emulator().library().struct("StepArgs");
        MemorySegment s = arena.allocate((long) struct.size() * tokens, 16);
        for (int t = 0; t < tokens; t++) {
            byte[] b = struct.pack(Map.of(
                    "token",
                    0,
                    "pos",
                    prefix + t,
                    "kv_len",
                    t < active ? prefix + t + 1 : 0,
                    "kv_row",
                    KV_ROW,
                    "slot",
                    0));
            MemorySegment.copy(b, 0, s, ValueLayout.JAVA_BYTE, (long) t * struct.size(), b.length);
        }
        return s;
    }

    /** The tiny models' shape (4 heads, latent 64 + rope 16): a fresh sequence, and one after 45 cached rows. */
    @Test
    void tinyShape() {
        check(4, 64, 16, 0, 37, 37, 71);
        check(4, 64, 16, 45, 40, 37, 72);
    }

    /**
     * A batch after a prefix long enough that its keys are split into parts (Geometry.FA_SPLIT_KEYS each), and one
     * whose parts would be more than the grid's Geometry.FA_SPLITS.
     */
    @Test
    void longPrefixSplitsTheKeys() {
        check(4, 64, 16, 2 * Geometry.FA_SPLIT_KEYS + 90, 37, 35, 74);
        // the first blocks of query rows see up to FA_SPLIT_KEYS keys (one part, written directly), the last more
        check(4, 64, 16, Geometry.FA_SPLIT_KEYS - 26, 37, 35, 76);
        check(4, 64, 16, (Geometry.FA_SPLITS + 1) * Geometry.FA_SPLIT_KEYS, 12, 12, 75);
    }

    /** GLM-4.7-Flash's shape (20 heads, latent 512 + rope 64): a threadgroup's 16 query rows straddle two tokens. */
    @Test
    void realShapeAfterPrefix() {
        check(20, 512, 64, 29, 7, 6, 73);
    }
}
