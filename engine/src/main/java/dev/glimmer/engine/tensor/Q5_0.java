package dev.glimmer.engine.tensor;

import java.lang.foreign.MemorySegment;

/**
 * ggml's Q5_0: blocks of 32 values, 22 bytes each:
 * <pre>
 *   fp16 d        scale
 *   u32  qh       bit j is the fifth bit of value j (little-endian)
 *   u8   qs[16]   low four bits: value j in the low nibble of byte j, value j+16 in its high nibble
 * </pre>
 * A value is {@code (q - 16) * d} with q in 0..31. Matmuls pair it with Q8_0 activations.
 */
public final class Q5_0 {

    public static final int BLOCK_SIZE = GgmlType.Q5_0.blockSize;
    public static final int BLOCK_BYTES = GgmlType.Q5_0.bytesPerBlock;
    private static final int QH = 2;
    private static final int QS = 6;

    private Q5_0() {}

    /** The values of the block at {@code xb}, into {@code dst[yb ..]}. */
    static void dequantizeBlock(MemorySegment src, long xb, float[] dst, int yb) {
        float d = Blocks.half(src, xb);
        int qh = src.get(Blocks.INT_LE, xb + QH);
        for (int j = 0; j < BLOCK_SIZE; j++) {
            dst[yb + j] = (Blocks.quant5(src, xb + QS, qh, j) - 16) * d;
        }
    }

    /** Weight block · Q8_0 activations: an exact integer sum per block, scaled by d_w * d_x. */
    static double addDot(double sum, MemorySegment w, long wb, QuantizedVector x, int b) {
        byte[] xq = x.quants;
        int xb = b * BLOCK_SIZE;
        int qh = w.get(Blocks.INT_LE, wb + QH);
        int sumi = 0;
        for (int j = 0; j < BLOCK_SIZE; j++) {
            sumi += (Blocks.quant5(w, wb + QS, qh, j) - 16) * xq[xb + j];
        }
        sum += (double) (Blocks.half(w, wb) * x.scales[b]) * sumi;
        return sum;
    }
}
