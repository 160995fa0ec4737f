package dev.glimmer.engine.backend.emulated;

import static dev.glimmer.engine.backend.emulated.KernelTestSupport.*;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import dev.glimmer.engine.tensor.GgmlType;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.Size3;
import dev.glimmer.kernels.emulator.FiberOrder;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The MLA attention kernels against the float reference of docs/MODEL.md §4. The KV cache holds halves: the cache row
 * written is the reference's rounded to half, and the attention is checked twice, tightly against the reference over
 * the cache's halves (the kernel's own arithmetic) and by the numerics policy's normalized error against the
 * reference over the float rows before rounding (what F16 storage costs).
 */
class AttentionKernelTest {

    private static final float EPS = 1e-5f;
    private static final float ROPE_BASE = 1e6f;
    private static final double TOLERANCE = 1e-5;
    /** Of a cache value's magnitude: rounding to half loses up to 2^-11 of it. */
    private static final double HALF_TOLERANCE = 5e-4;

    private static final int WIDE_THREADS = Geometry.WIDE_SIMDGROUPS * 32;
    private static final int MV_THREADS = Geometry.MV_SIMDGROUPS * 32;

    /** ggml's RoPE (NORM type): pairs (2i, 2i+1) rotated by an angle grown by float multiplication. */
    static void rope(double[] v, int offset, int n, int pos, float base) {
        float step = (float) Math.pow(base, -2.0f / n);
        float theta = pos;
        for (int i = 0; i < n / 2; i++) {
            double c = Math.cos(theta);
            double s = Math.sin(theta);
            double x0 = v[offset + 2 * i];
            double x1 = v[offset + 2 * i + 1];
            v[offset + 2 * i] = x0 * c - x1 * s;
            v[offset + 2 * i + 1] = x0 * s + x1 * c;
            theta *= step;
        }
    }

    private static MemorySegment step(Arena arena, int pos) {
        return args(arena, "StepArgs", Map.of("token", 0, "pos", pos, "kv_len", pos + 1, "kv_row", 0, "slot", 0));
    }

    // ---- mat_vec_pair ----

    private static void checkPair(int cols, GgmlType type1, int rows1, GgmlType type2, int rows2, long seed) {
        Random random = new Random(seed);
        MemorySegment w1 = randomWeights(type1, rows1, cols, random);
        MemorySegment w2 = randomWeights(type2, rows2, cols, random);
        float[] x = randomVector(cols, random);
        float[] normW = randomVector(cols, random);
        float[] h = rmsNorm(x, normW, EPS);
        Map<String, Number> a = Map.of(
                "cols",
                cols,
                "type1",
                type1.id,
                "rows1",
                rows1,
                "type2",
                type2.id,
                "rows2",
                rows2,
                "eps",
                EPS,
                "split",
                Geometry.MV_FEW_ROWS_SPLIT);
        int per = Geometry.mvRowsPerThreadgroup(Geometry.MV_FEW_ROWS_SPLIT);
        List<float[]> out = runInBothOrders(
                "mat_vec_pair",
                arena -> List.of(
                        args(arena, "MatVecPairArgs", a),
                        floats(arena, x),
                        floats(arena, normW),
                        copy(arena, w1),
                        arena.allocate(4L * rows1),
                        copy(arena, w2),
                        arena.allocate(4L * rows2)),
                new int[] {4 * Geometry.MV_SCRATCH_FLOATS},
                Size3.of((rows1 + per - 1) / per + (rows2 + per - 1) / per),
                Size3.of(Geometry.MV_SIMDGROUPS * 32),
                4,
                6);
        for (int k = 0; k < 2; k++) {
            MemorySegment w = k == 0 ? w1 : w2;
            GgmlType t = k == 0 ? type1 : type2;
            int rows = k == 0 ? rows1 : rows2;
            double[] expected = new double[rows];
            double[] magnitude = new double[rows];
            for (int r = 0; r < rows; r++) {
                Dot d = dot(dequantizedRow(w, t, r, cols), h);
                expected[r] = d.value();
                magnitude[r] = d.magnitude();
            }
            assertClose(expected, magnitude, out.get(k), TOLERANCE, "mat_vec_pair output " + (k + 1));
        }
    }

    @Test
    void pairOfMatVecsWithSharedNorm() {
        checkPair(128, GgmlType.Q8_0, 96, GgmlType.Q4_0, 80, 41);
        checkPair(256, GgmlType.Q4_K, 37, GgmlType.Q6_K, 20, 42);
    }

    /** q_a (2048 -> 768) and kv_a (2048 -> 576). */
    @Test
    void pairRealShape() {
        checkPair(2048, GgmlType.Q4_0, 768, GgmlType.Q8_0, 576, 43);
    }

    // ---- q heads + cache row ----

    private static void checkQHeads(
            int heads,
            int qLora,
            int nope,
            int rope,
            int latent,
            GgmlType qbType,
            GgmlType kbType,
            int pos,
            long seed) {
        Random random = new Random(seed);
        int perHead = nope + rope;
        int row = latent + rope;
        MemorySegment qb = randomWeights(qbType, heads * perHead, qLora, random);
        MemorySegment kb = randomWeights(kbType, heads * latent, nope, random);
        float[] qa = randomVector(qLora, random);
        float[] qaNorm = randomVector(qLora, random);
        float[] kv = randomVector(row, random);
        float[] kvNorm = randomVector(latent, random);

        float[] qn = rmsNorm(qa, qaNorm, EPS);
        double[] expectedQ = new double[heads * row];
        double[] magnitudeQ = new double[heads * row];
        for (int h = 0; h < heads; h++) {
            double[] full = new double[perHead];
            double[] fullMagnitude = new double[perHead];
            for (int r = 0; r < perHead; r++) {
                Dot d = dot(dequantizedRow(qb, qbType, h * perHead + r, qLora), qn);
                full[r] = d.value();
                fullMagnitude[r] = d.magnitude();
            }
            rope(full, nope, rope, pos, ROPE_BASE);
            float[] qNope = new float[nope];
            for (int d = 0; d < nope; d++) {
                qNope[d] = (float) full[d];
            }
            for (int c = 0; c < latent; c++) {
                float[] kRow = dequantizedRow(kb, kbType, h * latent + c, nope);
                Dot d = dot(kRow, qNope);
                expectedQ[h * row + c] = d.value();
                double m = 0;
                for (int i = 0; i < nope; i++) {
                    m += Math.abs(kRow[i]) * fullMagnitude[i];
                }
                magnitudeQ[h * row + c] = d.magnitude() + m;
            }
            for (int i = 0; i < rope; i++) {
                expectedQ[h * row + latent + i] = full[nope + i];
                magnitudeQ[h * row + latent + i] = fullMagnitude[nope + (i & ~1)] + fullMagnitude[nope + (i | 1)];
            }
        }
        float[] cacheRow = rmsNorm(Arrays.copyOf(kv, latent), kvNorm, EPS);
        double[] expectedRow = new double[row];
        double[] magnitudeRow = new double[row];
        for (int i = 0; i < latent; i++) {
            expectedRow[i] = cacheRow[i];
            magnitudeRow[i] = Math.abs(cacheRow[i]);
        }
        for (int i = 0; i < rope; i++) {
            expectedRow[latent + i] = kv[latent + i];
            magnitudeRow[latent + i] = Math.abs(kv[latent + (i & ~1)]) + Math.abs(kv[latent + (i | 1)]);
        }
        rope(expectedRow, latent, rope, pos, ROPE_BASE);

        // the decode step's q path: q_b with q_a_norm folded in, RoPE + the cache row, k_b per head (mat_vec grid y)
        int cacheRows = pos + 2;
        List<float[]> out = null;
        for (FiberOrder order : List.of(FiberOrder.inOrder(), FiberOrder.shuffled(7))) {
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment qFull = arena.allocate(4L * heads * perHead);
                MemorySegment q = arena.allocate(4L * heads * row);
                float[] initialCache = new float[cacheRows * row];
                Arrays.fill(initialCache, Float.NaN); // only row pos may change
                MemorySegment cache = halves(arena, initialCache);
                MemorySegment qaSegment = floats(arena, qa);
                int qbSplit = Geometry.mvSplit((long) heads * perHead);
                emulator()
                        .dispatch(
                                "mat_vec",
                                List.of(
                                        args(
                                                arena,
                                                "MatVecArgs",
                                                matVecArgs(qbType, qLora, heads * perHead, 1, qbSplit, 0, 0, 0)),
                                        copy(arena, qb),
                                        qaSegment,
                                        qFull,
                                        floats(arena, qaNorm),
                                        qFull),
                                new int[] {4 * Geometry.MV_SCRATCH_FLOATS},
                                Size3.of(groups(heads * perHead, Geometry.mvRowsPerThreadgroup(qbSplit))),
                                Size3.of(MV_THREADS),
                                order);
                emulator()
                        .dispatch(
                                "mla_rope_cache",
                                List.of(
                                        args(
                                                arena,
                                                "RopeCacheArgs",
                                                Map.of(
                                                        "heads",
                                                        heads,
                                                        "nope",
                                                        nope,
                                                        "rope",
                                                        rope,
                                                        "latent",
                                                        latent,
                                                        "eps",
                                                        EPS,
                                                        "rope_base",
                                                        ROPE_BASE)),
                                        step(arena, pos),
                                        qFull,
                                        floats(arena, kv),
                                        floats(arena, kvNorm),
                                        q,
                                        cache),
                                new int[] {4 * (Geometry.WIDE_SIMDGROUPS + (row + 3) / 4 * 4)},
                                Size3.of(1, heads + 1),
                                Size3.of(WIDE_THREADS),
                                order);
                int kbSplit = Geometry.mvSplit((long) heads * latent);
                emulator()
                        .dispatch(
                                "mat_vec",
                                List.of(
                                        args(
                                                arena,
                                                "MatVecArgs",
                                                matVecArgs(
                                                        kbType,
                                                        nope,
                                                        latent,
                                                        0,
                                                        kbSplit,
                                                        kb.byteSize() / heads,
                                                        perHead,
                                                        row)),
                                        copy(arena, kb),
                                        qFull,
                                        q,
                                        qFull,
                                        q),
                                new int[] {4 * Geometry.MV_SCRATCH_FLOATS},
                                Size3.of(groups(latent, Geometry.mvRowsPerThreadgroup(kbSplit)), heads),
                                Size3.of(MV_THREADS),
                                order);
                List<float[]> run = List.of(q.toArray(ValueLayout.JAVA_FLOAT), fromHalves(cache));
                if (out == null) {
                    out = run;
                } else {
                    assertArrayEquals(out.get(0), run.get(0), "in-order and shuffled runs differ (q)");
                    assertArrayEquals(out.get(1), run.get(1), "in-order and shuffled runs differ (cache)");
                }
            }
        }
        assertClose(expectedQ, magnitudeQ, out.get(0), TOLERANCE, "q");
        float[] cache = out.get(1);
        for (int i = 0; i < cacheRows * row; i++) {
            if (i / row != pos && !Float.isNaN(cache[i])) {
                throw new AssertionError("cache value " + i + " outside row " + pos + " was written");
            }
        }
        float[] written = Arrays.copyOfRange(cache, pos * row, (pos + 1) * row);
        assertClose(expectedRow, magnitudeRow, written, HALF_TOLERANCE, "cache row");
        assertNmse(expectedRow, written, "cache row");
    }

    @Test
    void qHeadsAndCacheRowTinyShape() {
        checkQHeads(4, 96, 32, 16, 64, GgmlType.Q8_0, GgmlType.Q4_0, 5, 51);
        checkQHeads(3, 256, 32, 16, 64, GgmlType.Q4_K, GgmlType.F16, 0, 52);
    }

    /** 20 heads, q_b 768 -> 5120, k_b 192 -> 512 per head, at position 999. */
    @Test
    void qHeadsRealShape() {
        checkQHeads(20, 768, 192, 64, 512, GgmlType.Q4_K, GgmlType.Q8_0, 999, 53);
    }

    /** MatVecArgs of a mat_vec without a residual: {@code norm} 1 folds the RMS norm into x. */
    private static Map<String, Number> matVecArgs(
            GgmlType type, int cols, int rows, int norm, int split, long wStep, int xStep, int yStep) {
        return Map.of(
                "type", type.id, "cols", cols, "rows", rows, "norm", norm, "add", 0, "eps", EPS, "split", split,
                "w_step", wStep, "x_step", xStep, "y_step", yStep);
    }

    private static int groups(int rows, int perGroup) {
        return (rows + perGroup - 1) / perGroup;
    }

    // ---- attention + merge ----

    private static void checkAttention(
            int heads, int latent, int rope, int kvLen, int splits, int vHead, GgmlType vbType, long seed) {
        Random random = new Random(seed);
        int row = latent + rope;
        float[] q = randomVector(heads * row, random);
        float[] floatCache = randomVector(kvLen * row, random);
        float[] cache = toHalves(floatCache); // as the cache holds them
        MemorySegment vb = randomWeights(vbType, heads * vHead, latent, random);
        float scale = (float) (1 / Math.sqrt(latent / 2.0));

        double[] magnitude = new double[heads * vHead];
        double[] expected = reference(heads, latent, rope, kvLen, vHead, vbType, q, cache, vb, scale, magnitude);
        double[] unrounded = reference(heads, latent, rope, kvLen, vHead, vbType, q, floatCache, vb, scale, magnitude);
        Map<String, Number> attentionArgs =
                Map.of("heads", heads, "latent", latent, "rope", rope, "splits", splits, "scale", scale);
        Map<String, Number> mergeArgs =
                Map.of("heads", heads, "latent", latent, "splits", splits, "parts", Geometry.MERGE_PARTS);
        int vbSplit = Geometry.mvSplit((long) heads * vHead);
        List<float[]> results = new ArrayList<>();
        for (FiberOrder order : List.of(FiberOrder.inOrder(), FiberOrder.shuffled(9))) {
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment partials = arena.allocate(4L * splits * heads * (latent + 2));
                MemorySegment o = arena.allocate(4L * heads * vHead);
                emulator()
                        .dispatch(
                                "mla_attention",
                                List.of(
                                        args(arena, "AttentionArgs", attentionArgs),
                                        step(arena, kvLen - 1),
                                        floats(arena, q),
                                        halves(arena, cache),
                                        partials),
                                new int[0],
                                Size3.of(1, splits),
                                Size3.of(WIDE_THREADS),
                                order);
                MemorySegment lat = arena.allocate(4L * heads * latent);
                emulator()
                        .dispatch(
                                "mla_merge_latent",
                                List.of(args(arena, "MergeArgs", mergeArgs), step(arena, kvLen - 1), partials, lat),
                                new int[] {4 * (WIDE_THREADS + Geometry.WIDE_SIMDGROUPS + splits)},
                                new Size3(1, heads, Geometry.MERGE_PARTS),
                                Size3.of(WIDE_THREADS),
                                order);
                emulator()
                        .dispatch(
                                "mat_vec",
                                List.of(
                                        args(
                                                arena,
                                                "MatVecArgs",
                                                matVecArgs(
                                                        vbType,
                                                        latent,
                                                        vHead,
                                                        0,
                                                        vbSplit,
                                                        vb.byteSize() / heads,
                                                        latent,
                                                        vHead)),
                                        copy(arena, vb),
                                        lat,
                                        o,
                                        lat,
                                        o),
                                new int[] {4 * Geometry.MV_SCRATCH_FLOATS},
                                Size3.of(groups(vHead, Geometry.mvRowsPerThreadgroup(vbSplit)), heads),
                                Size3.of(MV_THREADS),
                                order);
                results.add(o.toArray(ValueLayout.JAVA_FLOAT));
            }
        }
        assertArrayEquals(results.get(0), results.get(1), "in-order and shuffled runs differ");
        assertClose(expected, magnitude, results.get(0), TOLERANCE, "attention output");
        assertNmse(unrounded, results.get(0), "attention output against the float cache");
    }

    /** The attention of {@code heads} queries over {@code cache} and v_b, in double; fills {@code magnitude}. */
    private static double[] reference(
            int heads,
            int latent,
            int rope,
            int kvLen,
            int vHead,
            GgmlType vbType,
            float[] q,
            float[] cache,
            MemorySegment vb,
            float scale,
            double[] magnitude) {
        int row = latent + rope;
        double[] expected = new double[heads * vHead];
        for (int h = 0; h < heads; h++) {
            double[] s = new double[kvLen];
            double max = Double.NEGATIVE_INFINITY;
            for (int u = 0; u < kvLen; u++) {
                double d = 0;
                for (int i = 0; i < row; i++) {
                    d += (double) q[h * row + i] * cache[u * row + i];
                }
                s[u] = d * scale;
                max = Math.max(max, s[u]);
            }
            double sum = 0;
            for (int u = 0; u < kvLen; u++) {
                s[u] = Math.exp(s[u] - max);
                sum += s[u];
            }
            float[] lat = new float[latent];
            for (int c = 0; c < latent; c++) {
                double v = 0;
                for (int u = 0; u < kvLen; u++) {
                    v += s[u] / sum * cache[u * row + c];
                }
                lat[c] = (float) v;
            }
            for (int e = 0; e < vHead; e++) {
                float[] vRow = dequantizedRow(vb, vbType, h * vHead + e, latent);
                Dot d = dot(vRow, lat);
                expected[h * vHead + e] = d.value();
                double m = 0;
                for (float w : vRow) {
                    m += Math.abs(w); // the latent values are averages of values of magnitude ~1
                }
                magnitude[h * vHead + e] = d.magnitude() + m;
            }
        }
        return expected;
    }

    @Test
    void attentionSmallWithEmptySplits() {
        checkAttention(4, 64, 16, 5, 8, 48, GgmlType.Q8_0, 61);
        checkAttention(4, 64, 16, 1, 8, 48, GgmlType.F32, 62);
        checkAttention(9, 32, 32, 37, 4, 16, GgmlType.Q4_0, 63);
    }

    /** 20 heads over 1,000 cached latent rows of 576, 32 splits, v_b 512 -> 256 per head. */
    @Test
    void attentionRealShape() {
        checkAttention(20, 512, 64, 1000, 32, 256, GgmlType.Q8_0, 64);
    }
}
