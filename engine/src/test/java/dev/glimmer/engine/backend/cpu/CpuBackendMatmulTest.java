package dev.glimmer.engine.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.gguf.TensorInfo;
import dev.glimmer.engine.model.Oracle;
import dev.glimmer.engine.model.WeightMatrix;
import dev.glimmer.engine.tensor.GgmlType;
import dev.glimmer.engine.tensor.Q4_0;
import dev.glimmer.engine.tensor.Q8_0;
import dev.glimmer.engine.tensor.QuantizedVector;
import dev.glimmer.engine.tensor.VecDot;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.EnumSet;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The SIMD, multi-threaded matmul against the tensor package's reference dot products (the numerics the
 * conformance tests hold against llama.cpp): for every weight type with a kernel, for batches of 1 and
 * several tokens, with 1 and 2 threads, every output equals the reference dot of that row and token.
 * The weight rows start at odd multiples of 2 bytes (as 18-byte Q4_0 blocks do in a file) and the
 * activations span several orders of magnitude, so the double accumulation is exercised.
 */
class CpuBackendMatmulTest {
    private static final int ROWS = 37;
    private static final int COLS = 2048 + 64;

    @Test
    void q4_0MatchesReferenceDots() {
        check(GgmlType.Q4_0, quantizedRows(GgmlType.Q4_0));
    }

    /** Rows of whole groups of four blocks, which batches take through the two-token grouped kernel. */
    @Test
    void q4_0RowsOfWholeBlockGroupsMatchReferenceDots() {
        int cols = 2048;
        check(new WeightMatrix("w", GgmlType.Q4_0, quantizedRows(GgmlType.Q4_0, cols), ROWS, cols));
    }

    @Test
    void q8_0MatchesReferenceDots() {
        check(GgmlType.Q8_0, quantizedRows(GgmlType.Q8_0));
    }

    @Test
    void f32MatchesReferenceDots() {
        Random random = new Random(3);
        MemorySegment data = Arena.ofAuto().allocate(2 + (long) ROWS * COLS * 4).asSlice(2);
        for (long i = 0; i < (long) ROWS * COLS; i++) {
            data.set(ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 4 * i, (float)
                    random.nextGaussian());
        }
        check(GgmlType.F32, data);
    }

    /**
     * Real rows as llama-quantize writes them: every Q4_K, Q5_K, Q6_K and Q5_0 tensor of the small Q4_K_M
     * oracle model (its first rows), each output equal to the reference dot.
     */
    @Test
    void kQuantAndQ5_0RowsOfTheQ4_K_MOracleModelMatchReferenceDots() throws IOException {
        Set<GgmlType> types = EnumSet.of(GgmlType.Q4_K, GgmlType.Q5_K, GgmlType.Q6_K, GgmlType.Q5_0);
        Set<GgmlType> seen = EnumSet.noneOf(GgmlType.class);
        try (GgufFile file = GgufFile.open(Oracle.model("small-q4_k_m"))) {
            for (TensorInfo t : file.tensors()) {
                if (types.contains(t.type()) && t.shape().length > 1) {
                    int rows = (int) Math.min(t.rows(), ROWS);
                    check(new WeightMatrix(t.name(), t.type(), file.data(t), rows, (int) t.ne(0)));
                    seen.add(t.type());
                }
            }
        }
        assertEquals(types, seen, "weight types found in small-q4_k_m");
    }

    /**
     * F16 weights over their whole range (normal values of several magnitudes, subnormals, ±0, the largest
     * finite half) in the rows of a file, 2 bytes past an 8-byte boundary.
     */
    @Test
    void f16MatchesReferenceDots() {
        Random random = new Random(4);
        MemorySegment data = Arena.ofAuto().allocate(2 + (long) ROWS * COLS * 2).asSlice(2);
        short[] special = {0x0001, (short) 0x8001, 0x03ff, 0x0000, (short) 0x8000, 0x7bff, (short) 0xfbff};
        for (long i = 0; i < (long) ROWS * COLS; i++) {
            short h = i % 97 < special.length
                    ? special[(int) (i % 97)]
                    : Float.floatToFloat16((float) (random.nextGaussian() * Math.pow(10, random.nextInt(5) - 3)));
            data.set(ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 2 * i, h);
        }
        check(GgmlType.F16, data);
        check(new WeightMatrix(
                "odd", GgmlType.F16, data, ROWS, COLS - 61)); // a row length the vector steps leave a tail of
    }

    @Test
    void typesWithoutKernelUseTheReferenceDots() {
        Random random = new Random(5);
        MemorySegment data = Arena.ofAuto().allocate((long) ROWS * COLS * 2);
        for (long i = 0; i < (long) ROWS * COLS; i++) {
            float v = (float) random.nextGaussian();
            data.set(ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 2 * i, (short)
                    (Float.floatToRawIntBits(v) >>> 16));
        }
        check(GgmlType.BF16, data);
    }

    /**
     * The largest products the quants allow, all of one sign: Q4_0 weights of -8 (a constant row) and
     * Q8_0 weights of 127, against activations that all round to ±127. A 16-bit lane must not overflow.
     */
    @Test
    void extremeQuantsDoNotOverflow() {
        for (GgmlType type : new GgmlType[] {GgmlType.Q4_0, GgmlType.Q8_0}) {
            long rowBytes = type.rowBytes(COLS);
            MemorySegment data = Arena.ofAuto().allocate(rowBytes);
            float[] row = new float[COLS];
            java.util.Arrays.fill(row, type == GgmlType.Q4_0 ? -1f : 1f);
            byte[] q = type == GgmlType.Q4_0 ? Q4_0.quantizeRow(row, 0, COLS) : Q8_0.quantizeRow(row, 0, COLS);
            MemorySegment.copy(MemorySegment.ofArray(q), 0, data, 0, rowBytes);
            WeightMatrix w = new WeightMatrix("extreme", type, data, 1, COLS);
            for (float sign : new float[] {-1f, 1f}) {
                float[] x = new float[COLS];
                java.util.Arrays.fill(x, sign * 3f);
                float[] out = new float[1];
                new CpuBackend(1).matmul(w, x, 0, COLS, 1, out, 0, 1);
                QuantizedVector xq = QuantizedVector.forWeights(type);
                xq.quantize(x, 0, COLS);
                assertEquals(VecDot.dot(type, data, 0, xq, COLS), out[0], type + " sign " + sign);
            }
        }
    }

    /** Random rows quantized by the reference quantizer, placed 2 bytes past an 8-byte boundary. */
    private static MemorySegment quantizedRows(GgmlType type) {
        return quantizedRows(type, COLS);
    }

    private static MemorySegment quantizedRows(GgmlType type, int cols) {
        Random random = new Random(type.ordinal());
        long rowBytes = type.rowBytes(cols);
        MemorySegment data = Arena.ofAuto().allocate(2 + ROWS * rowBytes).asSlice(2);
        float[] row = new float[cols];
        for (int r = 0; r < ROWS; r++) {
            for (int i = 0; i < cols; i++) {
                row[i] = (float) (random.nextGaussian() * Math.pow(10, random.nextInt(3) - 1));
            }
            byte[] q = type == GgmlType.Q4_0 ? Q4_0.quantizeRow(row, 0, cols) : Q8_0.quantizeRow(row, 0, cols);
            MemorySegment.copy(MemorySegment.ofArray(q), 0, data, r * rowBytes, rowBytes);
        }
        return data;
    }

    private static void check(GgmlType type, MemorySegment data) {
        check(new WeightMatrix("w", type, data, ROWS, COLS));
    }

    /**
     * Every output of {@code w} · 1 and 5 tokens, with 1 and 2 threads, equals the reference dot of its
     * row and token.
     */
    private static void check(WeightMatrix w) {
        GgmlType type = w.type();
        int cols = w.cols();
        int rows = w.rows();
        Random random = new Random(7);
        int n = 5;
        int stride = cols + 3;
        float[] x = new float[1 + n * stride];
        for (int i = 0; i < x.length; i++) {
            x[i] = (float) (random.nextGaussian() * Math.pow(10, random.nextInt(5) - 2));
        }
        for (int threads = 1; threads <= 2; threads++) {
            CpuBackend backend = new CpuBackend(threads);
            for (int tokens : new int[] {1, n}) {
                int outStride = rows + 1;
                float[] out = new float[tokens * outStride];
                backend.matmul(w, x, 1, stride, tokens, out, 0, outStride);
                for (int t = 0; t < tokens; t++) {
                    QuantizedVector xq = QuantizedVector.forWeights(type);
                    xq.quantize(x, 1 + t * stride, cols);
                    for (int r = 0; r < rows; r++) {
                        float expected = VecDot.dot(type, w.data(), r * w.rowBytes(), xq, cols);
                        assertEquals(
                                expected,
                                out[t * outStride + r],
                                w.name() + " " + type + " row " + r + " token " + t + " threads " + threads);
                    }
                }
            }
        }
    }
}
