package dev.glimmer.engine.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.backend.emulated.KernelTestSupport;
import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.gguf.TensorInfo;
import dev.glimmer.engine.model.Oracle;
import dev.glimmer.engine.tensor.Dequantizer;
import dev.glimmer.engine.tensor.GgmlType;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.Size3;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Kernels on the GPU against the CPU reference (ggml's dequantization times float activations, in
 * double): mat_vec for every weight type the kernels read, at GLM-4.7-Flash shapes and batched,
 * with random weights quantized by the engine or real tensors of the oracle models; argmax with
 * ties; the prompt kernels' mat_mat on the tensor cores (mma.sync) against weights rounded to half times
 * activations as two halves, as the tensor cores take them. Every launch is repeated and must give identical bits.
 */
class CudaKernelTest {

    private static final float EPS = 1e-5f;
    private static final double TOLERANCE = 1e-5;

    @ParameterizedTest
    @ValueSource(strings = {"F32", "F16", "Q4_0", "Q8_0"})
    void matVecOfQuantizedRandomWeights(String typeName) {
        GgmlType type = GgmlType.valueOf(typeName);
        checkMatVec(type, KernelTestSupport.randomWeights(type, 768, 2048, new Random(1)), 768, 2048, true, false, 11);
        checkMatVec(
                type, KernelTestSupport.randomWeights(type, 2048, 5120, new Random(2)), 2048, 5120, false, true, 12);
        checkMatVec(type, KernelTestSupport.randomWeights(type, 37, 512, new Random(3)), 37, 512, true, true, 13);
    }

    /** The K-quants and Q5_0 as they are stored in a real file (small-q4_k_m). */
    @ParameterizedTest
    @ValueSource(
            strings = {
                "blk.0.attn_k_b.weight",
                "blk.0.attn_output.weight",
                "token_embd.weight",
                "output.weight",
                "blk.1.ffn_down_exps.weight"
            })
    void matVecOfOracleTensors(String name) throws IOException {
        try (GgufFile file = GgufFile.open(Oracle.model("small-q4_k_m"))) {
            TensorInfo t = file.tensor(name);
            int cols = (int) t.ne(0);
            int rows = (int) Math.min(t.ne(1), 4096);
            MemorySegment w =
                    file.mapping().asSlice(file.fileOffset(t), t.type().rowBytes(cols) * rows);
            checkMatVec(t.type(), w, rows, cols, true, true, name.hashCode());
            checkMatVec(t.type(), w, rows, cols, false, false, name.hashCode() + 1);
        }
    }

    /**
     * A full prompt batch of GLM-4.7-Flash's q_a shape, and a small matrix that ends inside a tile (rows) with a
     * partly used last tile of tokens, for the types of the full-size files; both in column parts as the prompt
     * list runs them (Geometry.mmParts: 8 and 2), added up by mat_mat_parts.
     */
    @ParameterizedTest
    @ValueSource(strings = {"F32", "F16", "Q4_0", "Q8_0"})
    void matMatOnTheTensorCores(String typeName) {
        GgmlType type = GgmlType.valueOf(typeName);
        checkMatMat(
                type,
                KernelTestSupport.randomWeights(type, 768, 2048, new Random(4)),
                768,
                2048,
                Geometry.PROMPT_TOKENS,
                Geometry.PROMPT_TOKENS,
                false,
                14);
        checkMatMat(
                type,
                KernelTestSupport.randomWeights(type, 37, 512, new Random(5)),
                37,
                512,
                2 * Geometry.MM_TOKENS,
                2 * Geometry.MM_TOKENS - 3,
                true,
                15);
    }

    /** The K-quants and Q5_0 as they are stored in a real file (small-q4_k_m), through mat_mat. */
    @ParameterizedTest
    @ValueSource(strings = {"blk.0.attn_k_b.weight", "blk.0.attn_output.weight", "blk.1.ffn_down_exps.weight"})
    void matMatOfOracleTensors(String name) throws IOException {
        try (GgufFile file = GgufFile.open(Oracle.model("small-q4_k_m"))) {
            TensorInfo t = file.tensor(name);
            int cols = (int) t.ne(0);
            int rows = (int) Math.min(t.ne(1), 4096);
            MemorySegment w =
                    file.mapping().asSlice(file.fileOffset(t), t.type().rowBytes(cols) * rows);
            checkMatMat(t.type(), w, rows, cols, Geometry.MM_TOKENS + 5, Geometry.MM_TOKENS + 5, true, name.hashCode());
        }
    }

    @Test
    void argmaxTakesTheFirstOfTiedMaxima() {
        CudaKernels k = CudaTestSupport.kernels();
        CudaDriver d = k.device().driver();
        Random random = new Random(7);
        int n = 154880;
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = (float) random.nextGaussian();
        }
        v[99_001] = 9f;
        v[12_345] = 9f;
        v[150_000] = 9f;
        int parts = Geometry.ARGMAX_PARTS;
        long args =
                CudaTestSupport.uploadBytes(d, k.library().struct("ArgmaxArgs").pack(Map.of("n", n, "parts", parts)));
        long step = CudaTestSupport.uploadBytes(
                d,
                k.library().struct("StepArgs").pack(Map.of("token", 0, "pos", 0, "kv_len", 1, "kv_row", 0, "slot", 0)));
        long greedy = d.alloc(4);
        long values = CudaTestSupport.upload(d, v);
        long best = d.alloc(4L * parts);
        long index = d.alloc(4L * parts);
        long result = d.alloc(16);
        for (int rep = 0; rep < 3; rep++) {
            d.memset(result, (byte) 0xFF, 16);
            k.launch(
                    "argmax_parts",
                    MemorySegment.NULL,
                    Size3.of(parts),
                    Size3.of(Geometry.WIDE_SIMDGROUPS * 32),
                    new long[] {args, values, best, index},
                    new int[] {8 * Geometry.WIDE_SIMDGROUPS});
            k.launch(
                    "argmax",
                    MemorySegment.NULL,
                    Size3.of(1),
                    Size3.of(Geometry.WIDE_SIMDGROUPS * 32),
                    new long[] {args, best, index, result, step, greedy},
                    new int[] {8 * Geometry.WIDE_SIMDGROUPS});
            assertEquals(12_345, Float.floatToRawIntBits(CudaTestSupport.download(d, result, 1)[0]));
            assertEquals(12_345, Float.floatToRawIntBits(CudaTestSupport.download(d, greedy, 1)[0]));
        }
        for (long p : new long[] {args, values, best, index, result, step, greedy}) {
            d.free(p);
        }
    }

    private static void checkMatVec(
            GgmlType type, MemorySegment w, int rows, int cols, boolean norm, boolean add, long seed) {
        CudaKernels k = CudaTestSupport.kernels();
        CudaDriver d = k.device().driver();
        Random random = new Random(seed);
        float[] x = KernelTestSupport.randomVector(cols, random);
        float[] normW = KernelTestSupport.randomVector(cols, random);
        float[] residual = KernelTestSupport.randomVector(rows, random);
        double[] expected = new double[rows];
        double[] magnitude = new double[rows];
        float[] row = new float[cols];
        float[] in = norm ? KernelTestSupport.rmsNorm(x, normW, EPS) : x;
        for (int r = 0; r < rows; r++) {
            Dequantizer.dequantizeRow(type, w, type.rowBytes(cols) * r, row, 0, cols);
            double s = 0;
            double m = 0;
            for (int c = 0; c < cols; c++) {
                s += (double) row[c] * in[c];
                m += Math.abs((double) row[c] * in[c]);
            }
            expected[r] = s + (add ? residual[r] : 0);
            magnitude[r] = m + (add ? Math.abs(residual[r]) : 0);
        }
        Map<String, Number> a = Map.of(
                "type",
                type.id,
                "cols",
                cols,
                "rows",
                rows,
                "norm",
                norm ? 1 : 0,
                "add",
                add ? 1 : 0,
                "eps",
                EPS,
                "split",
                Geometry.mvSplit(rows),
                "w_step",
                0,
                "x_step",
                0,
                "y_step",
                0);
        long args =
                CudaTestSupport.uploadBytes(d, k.library().struct("MatVecArgs").pack(a));
        long weights = CudaTestSupport.upload(d, w);
        long xs = CudaTestSupport.upload(d, x);
        long nw = CudaTestSupport.upload(d, normW);
        long y = d.alloc(4L * rows);
        int per = Geometry.mvRowsPerThreadgroup(Geometry.mvSplit(rows));
        int groups = (rows + per - 1) / per;
        float[] first = null;
        for (int rep = 0; rep < 3; rep++) {
            // with the residual added, y is the residual itself: the in-place update of the decode step
            if (add) {
                d.copyToDevice(y, nativeCopy(residual), 4L * rows);
            } else {
                d.memset(y, (byte) 0x7F, 4L * rows);
            }
            k.launch(
                    "mat_vec",
                    MemorySegment.NULL,
                    Size3.of(groups),
                    Size3.of(Geometry.MV_SIMDGROUPS * 32),
                    new long[] {args, weights, xs, y, nw, y},
                    new int[] {4 * Geometry.MV_SCRATCH_FLOATS});
            float[] got = CudaTestSupport.download(d, y, rows);
            if (first == null) {
                first = got;
                for (int i = 0; i < got.length; i++) {
                    double err = Math.abs(got[i] - expected[i]);
                    double allowed = TOLERANCE * magnitude[i] + 1e-6;
                    assertTrue(
                            err <= allowed,
                            "mat_vec " + type + " " + cols + "x" + rows + " element " + i + " is " + got[i]
                                    + ", expected " + expected[i] + " (error " + err + " > " + allowed + ")");
                }
            } else {
                assertArrayEquals(first, got, "mat_vec " + type + ": a repeated launch gave other bits");
            }
        }
        for (long p : new long[] {args, weights, xs, nw, y}) {
            d.free(p);
        }
    }

    /**
     * mat_mat over a batch of {@code tokens}, the first {@code active} holding a row (the others' outputs stay
     * untouched). The tolerance is 10x the emulator's: the tensor cores sum in float, in their own order.
     */
    private static void checkMatMat(
            GgmlType type, MemorySegment w, int rows, int cols, int tokens, int active, boolean add, long seed) {
        CudaKernels k = CudaTestSupport.kernels();
        CudaDriver d = k.device().driver();
        Random random = new Random(seed);
        float[] x = KernelTestSupport.randomVector(tokens * cols, random);
        float[] y0 = KernelTestSupport.randomVector(tokens * rows, random);
        float[][] halfRows = new float[rows][cols];
        for (int r = 0; r < rows; r++) {
            Dequantizer.dequantizeRow(type, w, type.rowBytes(cols) * r, halfRows[r], 0, cols);
            halfRows[r] = KernelTestSupport.toHalves(halfRows[r]);
        }
        float[] halfX = KernelTestSupport.toHalfPairs(x);
        double[] expected = new double[tokens * rows];
        double[] magnitude = new double[tokens * rows];
        for (int i = 0; i < expected.length; i++) {
            expected[i] = y0[i];
        }
        for (int t = 0; t < active; t++) {
            for (int r = 0; r < rows; r++) {
                double s = 0;
                double m = 0;
                for (int c = 0; c < cols; c++) {
                    double p = (double) halfRows[r][c] * halfX[t * cols + c];
                    s += p;
                    m += Math.abs(p);
                }
                int i = t * rows + r;
                expected[i] = s + (add ? y0[i] : 0);
                magnitude[i] = m + (add ? Math.abs(y0[i]) : 0);
            }
        }
        Map<String, Number> a = new HashMap<>(Map.of(
                "type",
                type.id,
                "cols",
                cols,
                "rows",
                rows,
                "tokens",
                tokens,
                "x_stride",
                cols,
                "y_stride",
                rows,
                "w_step",
                0,
                "x_step",
                0,
                "y_step",
                0,
                "add",
                add ? 1 : 0));
        a.put("split", 1); // mat_mat ignores it
        int parts = Geometry.mmParts(tokens, rows, cols);
        a.put("parts", parts);
        long args =
                CudaTestSupport.uploadBytes(d, k.library().struct("MatMatArgs").pack(a));
        long stepArgs = CudaTestSupport.uploadBytes(d, stepBytes(k, tokens, active));
        long weights = CudaTestSupport.upload(d, w);
        long xs = CudaTestSupport.upload(d, x);
        long y = d.alloc(4L * tokens * rows);
        long partials = d.alloc(4L * parts * tokens * rows);
        Size3 grid = Size3.of(
                (tokens + Geometry.MM_TOKENS - 1) / Geometry.MM_TOKENS * parts,
                (rows + Geometry.MM_ROWS - 1) / Geometry.MM_ROWS);
        float[] first = null;
        for (int rep = 0; rep < 3; rep++) {
            d.copyToDevice(y, nativeCopy(y0), 4L * tokens * rows);
            k.launch(
                    "mat_mat",
                    MemorySegment.NULL,
                    grid,
                    Size3.of(Geometry.MM_SIMDGROUPS * 32),
                    new long[] {args, weights, xs, y, stepArgs, partials},
                    new int[] {4 * Geometry.mmMemoryFloats(Geometry.MM_ROWS, Geometry.MM_TOKENS)});
            if (parts > 1) {
                int threads = Geometry.WIDE_SIMDGROUPS * 32;
                k.launch(
                        "mat_mat_parts",
                        MemorySegment.NULL,
                        Size3.of(tokens, (rows + threads - 1) / threads),
                        Size3.of(threads),
                        new long[] {args, partials, y, stepArgs},
                        new int[0]);
            }
            float[] got = CudaTestSupport.download(d, y, tokens * rows);
            if (first == null) {
                first = got;
                for (int i = 0; i < got.length; i++) {
                    double err = Math.abs(got[i] - expected[i]);
                    double allowed = 10 * TOLERANCE * magnitude[i] + 1e-6;
                    assertTrue(
                            err <= allowed,
                            "mat_mat " + type + " " + cols + "x" + rows + " token " + i / rows
                                    + " row " + i % rows + " is " + got[i] + ", expected " + expected[i] + " (error "
                                    + err
                                    + " > " + allowed + ")");
                }
            } else {
                assertArrayEquals(first, got, "mat_mat " + type + ": a repeated launch gave other bits");
            }
        }
        for (long p : new long[] {args, stepArgs, weights, xs, y, partials}) {
            d.free(p);
        }
    }

    /** The StepArgs of a batch: the first {@code active} tokens at positions 0, 1, ..., the rest kv_len 0. */
    private static byte[] stepBytes(CudaKernels k, int tokens, int active) {
        var struct = k.library().struct("StepArgs");
        byte[] out = new byte[struct.size() * tokens];
        for (int t = 0; t < tokens; t++) {
            byte[] b =
                    struct.pack(Map.of("token", 0, "pos", t, "kv_len", t < active ? t + 1 : 0, "kv_row", 0, "slot", 0));
            System.arraycopy(b, 0, out, t * struct.size(), b.length);
        }
        return out;
    }

    private static MemorySegment nativeCopy(float[] v) {
        MemorySegment s = Arena.ofAuto().allocate(4L * v.length, 16);
        MemorySegment.copy(v, 0, s, ValueLayout.JAVA_FLOAT, 0, v.length);
        return s;
    }
}
