package dev.glimmer.engine.tensor;

import java.util.Arrays;

/**
 * ggml's Q8_K, used only for matmul activations against K-quant weights: per 256 values a
 * float32 scale d, 256 signed 8-bit quants, and the sums of each run of 16 quants (which the
 * K-quant dot products use to apply sub-block minimums). Kept as arrays in a
 * {@link QuantizedVector}, never read from files.
 */
final class Q8_K {

    static final int BLOCK_SIZE = GgmlType.Q8_K.blockSize;

    private Q8_K() {}

    /**
     * ggml's {@code quantize_row_q8_K_ref}, which is also what ggml-cpu runs on x86
     * (no SIMD version there): the scale is set by the value of largest magnitude (the first
     * on ties), {@code iscale = -127 / max}, {@code q = min(127, nearest_int(iscale * x))}
     * with halves to even, and {@code d = 1 / iscale} kept as float (negative when the largest
     * value is positive: the quants then carry the opposite sign). An all-zero block gets
     * d = 0 and zero quants. ggml-base is compiled without FMA, so {@code iscale * x} is
     * rounded to float before {@code nearest_int} adds its constant; Java does the same.
     */
    static void quantizeActivations(float[] x, int offset, int n, byte[] quants, float[] scales, short[] blockSums) {
        for (int b = 0; b < n / BLOCK_SIZE; b++) {
            int xb = offset + b * BLOCK_SIZE;
            int qb = b * BLOCK_SIZE;
            float amax = 0f;
            float max = 0f;
            for (int j = 0; j < BLOCK_SIZE; j++) {
                float a = Math.abs(x[xb + j]);
                if (a > amax) {
                    amax = a;
                    max = x[xb + j];
                }
            }
            if (amax == 0f) {
                scales[b] = 0f;
                Arrays.fill(quants, qb, qb + BLOCK_SIZE, (byte) 0);
                Arrays.fill(blockSums, b * 16, b * 16 + 16, (short) 0);
                continue;
            }
            float iscale = -127f / max;
            for (int j = 0; j < BLOCK_SIZE; j++) {
                quants[qb + j] = (byte) Math.min(127, nearestInt(iscale * x[xb + j]));
            }
            for (int g = 0; g < 16; g++) {
                int sum = 0;
                for (int j = 0; j < 16; j++) {
                    sum += quants[qb + g * 16 + j];
                }
                blockSums[b * 16 + g] = (short) sum;
            }
            scales[b] = 1f / iscale;
        }
    }

    /**
     * ggml's {@code nearest_int}: adds 1.5·2^23 so that the float addition itself rounds to
     * an integer, halves to even; that is exactly {@link Math#rint} for the |x| ≤ 127 used here.
     */
    private static int nearestInt(float x) {
        return (int) Math.rint(x);
    }
}
