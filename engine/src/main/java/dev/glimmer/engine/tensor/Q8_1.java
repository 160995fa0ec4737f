package dev.glimmer.engine.tensor;

/**
 * ggml's Q8_1, used only for matmul activations against Q4_1 and Q5_1 weights: per 32
 * values an fp16 scale d, an fp16 {@code s = d * Σ q}, and 32 signed 8-bit quants.
 * Kept as arrays in a {@link QuantizedVector}, never read from files.
 */
final class Q8_1 {

    static final int BLOCK_SIZE = GgmlType.Q8_1.blockSize;

    private Q8_1() {}

    /**
     * ggml-cpu's x86 AVX/AVX2 {@code quantize_row_q8_1}: the quants exactly as for Q8_0
     * activations (multiplier 127/amax, halves to even), plus {@code s = fp16(d * Σ q)} where
     * d is the float {@code amax / 127} before it is rounded to fp16.
     */
    static void quantizeActivations(float[] x, int offset, int n, byte[] quants, float[] scales, float[] sums) {
        Q8_0.quantizeActivations(x, offset, n, quants, scales);
        for (int b = 0; b < n / BLOCK_SIZE; b++) {
            float d = Q8_0.blockAbsMax(x, offset + b * BLOCK_SIZE) / 127f;
            int sum = 0;
            for (int j = 0; j < BLOCK_SIZE; j++) {
                sum += quants[b * BLOCK_SIZE + j];
            }
            sums[b] = Float.float16ToFloat(Float.floatToFloat16(d * sum));
        }
    }
}
