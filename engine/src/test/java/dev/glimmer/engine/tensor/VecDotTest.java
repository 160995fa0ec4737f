package dev.glimmer.engine.tensor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.gguf.TensorInfo;
import java.lang.foreign.MemorySegment;
import java.util.EnumSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * Each dot product equals the float dot of the dequantized weight row and the dequantized
 * activation vector: the integer block sums are exact, so only the float rounding of the
 * combined scales (and, for Q4_1/Q5_1, of the fp16 activation sums) separates them.
 */
class VecDotTest {

    private static final GgmlType[] WEIGHT_TYPES = {
        GgmlType.F32,
        GgmlType.F16,
        GgmlType.BF16,
        GgmlType.Q4_0,
        GgmlType.Q4_1,
        GgmlType.Q5_0,
        GgmlType.Q5_1,
        GgmlType.Q8_0,
        GgmlType.Q4_K,
        GgmlType.Q5_K,
        GgmlType.Q6_K
    };

    /** Activations with a spread of magnitudes and a few outliers, as real hidden states have. */
    private static float[] activations(Random random, int n) {
        float[] x = new float[n];
        for (int i = 0; i < n; i++) {
            x[i] = (float) random.nextGaussian() * (random.nextInt(50) == 0 ? 20f : 1f);
        }
        return x;
    }

    /** A random row of {@code n} weights: random quant bits, random finite fp16 scales. */
    private static MemorySegment randomRow(Random random, GgmlType type, int n, long offset) {
        MemorySegment row = MemorySegment.ofArray(new byte[(int) (offset + type.rowBytes(n))]);
        switch (type) {
            case F32 -> {
                for (int i = 0; i < n; i++) {
                    row.set(Blocks.FLOAT_LE, offset + 4L * i, (float) random.nextGaussian());
                }
            }
            case F16 -> {
                for (int i = 0; i < n; i++) {
                    row.set(Blocks.SHORT_LE, offset + 2L * i, Float.floatToFloat16((float) random.nextGaussian()));
                }
            }
            case BF16 -> {
                for (int i = 0; i < n; i++) {
                    row.set(Blocks.SHORT_LE, offset + 2L * i, BF16.fromFloat((float) random.nextGaussian()));
                }
            }
            default -> {
                for (long i = offset; i < row.byteSize(); i++) {
                    Blocks.putByte(row, i, random.nextInt(256));
                }
                for (long b = 0; b < n / type.blockSize; b++) {
                    for (int field : scaleOffsets(type)) {
                        float scale = (float) (random.nextGaussian() * 0.05);
                        Blocks.putHalf(row, offset + b * type.bytesPerBlock + field, scale);
                    }
                }
            }
        }
        return row;
    }

    /** The byte offsets of the fp16 scale fields in a block of {@code type} (d, and m or dmin where it has one). */
    private static List<Integer> scaleOffsets(GgmlType type) {
        return switch (type) {
            case Q4_0, Q5_0, Q8_0 -> List.of(0);
            case Q4_1, Q5_1 -> List.of(0, 2);
            case Q4_K, Q5_K -> List.of(0, Q4_K.DMIN);
            case Q6_K -> List.of(Q6_K.D);
            default -> List.of();
        };
    }

    /**
     * Checks VecDot.dot against Σ w_i·x_i of the dequantized values, computed in double.
     * Allowed error: float rounding of each block's combined scale (2^-23 of Σ|w_i·x_i|) and,
     * for Q4_1/Q5_1, the fp16 rounding of the activation block sums s that carry the minimums.
     */
    private static void checkDot(GgmlType type, MemorySegment weights, long offset, float[] x, int n, String what) {
        QuantizedVector v = QuantizedVector.forWeights(type);
        v.quantize(x, 0, n);
        float[] xs = new float[n];
        v.dequantize(xs, 0);
        float[] ws = new float[n];
        Dequantizer.dequantizeRow(type, weights, offset, ws, 0, n);

        double exact = 0;
        double magnitude = 0;
        for (int i = 0; i < n; i++) {
            exact += (double) ws[i] * xs[i];
            magnitude += Math.abs((double) ws[i] * xs[i]);
        }
        double tolerance = magnitude * 0x1p-22 + Double.MIN_NORMAL;
        if (type == GgmlType.Q4_1 || type == GgmlType.Q5_1) {
            for (int b = 0; b < n / 32; b++) {
                double blockSum = 0;
                for (int i = b * 32; i < b * 32 + 32; i++) {
                    blockSum += xs[i];
                }
                float min = Blocks.half(weights, offset + (long) b * type.bytesPerBlock + 2);
                tolerance += Math.abs(min * blockSum) * 0x1p-9;
            }
        }
        float dot = VecDot.dot(type, weights, offset, v, n);
        assertEquals(exact, dot, tolerance, type + " " + what);
    }

    @Test
    void randomRowsOfEveryWeightType() {
        Random random = new Random(11);
        for (GgmlType type : WEIGHT_TYPES) {
            for (int trial = 0; trial < 20; trial++) {
                int n = 256 * (1 + random.nextInt(4));
                long offset = 2L * random.nextInt(20); // rows start anywhere 2-byte aligned
                MemorySegment row = randomRow(random, type, n, offset);
                checkDot(type, row, offset, activations(random, n), n, "trial " + trial);
            }
        }
    }

    @Test
    void realRowsOfTheOracleFiles() throws Exception {
        Random random = new Random(5);
        Set<GgmlType> seen = EnumSet.noneOf(GgmlType.class);
        for (String name : new String[] {"small-q4_k_m.gguf", "tiny-q4_0.gguf", "tiny-q8_0.gguf", "tiny-f32.gguf"}) {
            try (GgufFile file = OracleFiles.open(name)) {
                for (TensorInfo t : file.tensors()) {
                    if (t.shape().length < 2) {
                        continue;
                    }
                    seen.add(t.type());
                    int n = (int) t.ne(0);
                    float[] x = activations(random, n);
                    for (long row : new long[] {0, t.rows() / 2, t.rows() - 1}) {
                        checkDot(
                                t.type(),
                                file.data(t),
                                row * t.rowBytes(),
                                x,
                                n,
                                name + " " + t.name() + " row " + row);
                    }
                }
            }
        }
        assertEquals(
                EnumSet.of(
                        GgmlType.F32,
                        GgmlType.Q4_0,
                        GgmlType.Q8_0,
                        GgmlType.Q4_K,
                        GgmlType.Q5_K,
                        GgmlType.Q6_K,
                        GgmlType.Q5_0),
                seen);
    }

    @Test
    void theActivationMustBeInTheWeightsVecDotType() {
        MemorySegment row = MemorySegment.ofArray(new byte[144]);
        QuantizedVector q8_0 = new QuantizedVector(GgmlType.Q8_0);
        q8_0.quantize(new float[256], 0, 256);
        IllegalArgumentException e =
                assertThrows(IllegalArgumentException.class, () -> VecDot.dot(GgmlType.Q4_K, row, 0, q8_0, 256));
        assertTrue(e.getMessage().contains("Q8_K"), e.getMessage());
        QuantizedVector q8_K = new QuantizedVector(GgmlType.Q8_K);
        q8_K.quantize(new float[256], 0, 256);
        assertThrows(IllegalArgumentException.class, () -> VecDot.dot(GgmlType.Q4_K, row, 0, q8_K, 512));
    }

    @Test
    void anAllZeroActivationGivesZero() {
        Random random = new Random(2);
        for (GgmlType type : WEIGHT_TYPES) {
            MemorySegment row = randomRow(random, type, 256, 0);
            QuantizedVector v = QuantizedVector.forWeights(type);
            v.quantize(new float[256], 0, 256);
            assertEquals(0f, Math.abs(VecDot.dot(type, row, 0, v, 256)), type.toString());
        }
    }
}
