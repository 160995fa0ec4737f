package dev.glimmer.engine.tensor;

import java.lang.foreign.MemorySegment;

/**
 * ggml's Q8_0: blocks of 32 values, 34 bytes each:
 * <pre>
 *   fp16 d        scale
 *   i8   qs[32]   quants
 * </pre>
 * A value is {@code q * d}.
 */
public final class Q8_0 {

    public static final int BLOCK_SIZE = 32;
    public static final int BLOCK_BYTES = 34;
    private static final int QS = 2;

    private Q8_0() {
    }

    /** Reference quantization of {@code n} values into a new byte array of n/32 blocks. */
    public static byte[] quantizeRow(float[] x, int offset, int n) {
        Blocks.requireWholeBlocks(GgmlType.Q8_0, n);
        byte[] out = new byte[n / BLOCK_SIZE * BLOCK_BYTES];
        quantizeRow(x, offset, n, MemorySegment.ofArray(out), 0);
        return out;
    }

    /**
     * ggml's {@code quantize_row_q8_0_ref}, bit for bit (the quantizer that writes model files):
     * {@code d = amax / 127}, {@code q = roundf(x * (1/d))} with halves away from zero.
     * The activations of a matmul are quantized differently (ggml-cpu rounds halves to even).
     */
    public static void quantizeRow(float[] x, int offset, int n, MemorySegment dst, long dstOffset) {
        Blocks.requireWholeBlocks(GgmlType.Q8_0, n);
        for (int b = 0; b < n / BLOCK_SIZE; b++) {
            int xb = offset + b * BLOCK_SIZE;
            long yb = dstOffset + (long) b * BLOCK_BYTES;
            float amax = 0f;
            for (int j = 0; j < BLOCK_SIZE; j++) {
                float a = Math.abs(x[xb + j]);
                amax = amax > a ? amax : a; // ggml's MAX macro, kept literally for NaN inputs
            }
            float d = amax / 127f;
            float id = d != 0f ? 1f / d : 0f;
            Blocks.putHalf(dst, yb, d);
            for (int j = 0; j < BLOCK_SIZE; j++) {
                Blocks.putByte(dst, yb + QS + j, (int) Blocks.roundHalfAway(x[xb + j] * id));
            }
        }
    }
}
