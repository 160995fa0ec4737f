package dev.glimmer.engine.tensor;

import java.lang.foreign.MemorySegment;

/**
 * ggml's Q4_0: blocks of 32 values, 18 bytes each:
 * <pre>
 *   fp16 d        scale
 *   u8   qs[16]   byte j holds value j in its low nibble and value j+16 in its high nibble
 * </pre>
 * A value is {@code (q - 8) * d} with q in 0..15. Matmuls pair it with Q8_0 activations.
 */
public final class Q4_0 {

    public static final int BLOCK_SIZE = GgmlType.Q4_0.blockSize;
    public static final int BLOCK_BYTES = GgmlType.Q4_0.bytesPerBlock;
    private static final int QS = 2;

    private Q4_0() {}

    /** Reference quantization of {@code n} values into a new byte array of n/32 blocks. */
    public static byte[] quantizeRow(float[] x, int offset, int n) {
        Blocks.requireWholeBlocks(GgmlType.Q4_0, n);
        byte[] out = new byte[n / BLOCK_SIZE * BLOCK_BYTES];
        quantizeRow(x, offset, n, MemorySegment.ofArray(out), 0);
        return out;
    }

    /**
     * ggml's {@code quantize_row_q4_0_ref}, bit for bit: the scale is the value of largest
     * magnitude (the first one on ties) divided by -8, so that value maps exactly to q = 0
     * and the opposite end is clipped at 15; the other values are truncated after adding 8.5.
     */
    public static void quantizeRow(float[] x, int offset, int n, MemorySegment dst, long dstOffset) {
        Blocks.requireWholeBlocks(GgmlType.Q4_0, n);
        for (int b = 0; b < n / BLOCK_SIZE; b++) {
            int xb = offset + b * BLOCK_SIZE;
            long yb = dstOffset + (long) b * BLOCK_BYTES;
            float amax = 0f;
            float max = 0f;
            for (int j = 0; j < BLOCK_SIZE; j++) {
                float v = x[xb + j];
                if (amax < Math.abs(v)) {
                    amax = Math.abs(v);
                    max = v;
                }
            }
            float d = max / -8f;
            float id = d != 0f ? 1f / d : 0f;
            Blocks.putHalf(dst, yb, d);
            for (int j = 0; j < BLOCK_SIZE / 2; j++) {
                int lo = Math.min(15, truncateToInt8(x[xb + j] * id + 8.5f));
                int hi = Math.min(15, truncateToInt8(x[xb + j + BLOCK_SIZE / 2] * id + 8.5f));
                Blocks.putByte(dst, yb + QS + j, lo | hi << 4);
            }
        }
    }

    /** C's {@code (int8_t) f} for the range it is used on here (0.5..16.5 for finite input). */
    private static int truncateToInt8(float f) {
        return (byte) (int) f;
    }

    /** The values of the block at {@code xb}, into {@code dst[yb ..]}. */
    static void dequantizeBlock(MemorySegment src, long xb, float[] dst, int yb) {
        float d = Blocks.half(src, xb);
        for (int j = 0; j < BLOCK_SIZE / 2; j++) {
            int q = Blocks.u8(src, xb + QS + j);
            dst[yb + j] = ((q & 0xF) - 8) * d;
            dst[yb + j + BLOCK_SIZE / 2] = ((q >>> 4) - 8) * d;
        }
    }

    /** Weight block · Q8_0 activations: an exact integer sum per block, scaled by d_w * d_x. */
    static double addDot(double sum, MemorySegment w, long wb, QuantizedVector x, int b) {
        byte[] xq = x.quants;
        int xb = b * BLOCK_SIZE;
        int sumi = 0;
        for (int j = 0; j < BLOCK_SIZE / 2; j++) {
            int q = Blocks.u8(w, wb + QS + j);
            sumi += ((q & 0xF) - 8) * xq[xb + j] + ((q >>> 4) - 8) * xq[xb + j + BLOCK_SIZE / 2];
        }
        sum += (double) (Blocks.half(w, wb) * x.scales[b]) * sumi;
        return sum;
    }
}
