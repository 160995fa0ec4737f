package dev.glimmer.engine.tensor;

import java.lang.foreign.MemorySegment;

/**
 * ggml's Q5_1: blocks of 32 values, 24 bytes each:
 * <pre>
 *   fp16 d        scale
 *   fp16 m        minimum
 *   u32  qh       bit j is the fifth bit of value j (little-endian)
 *   u8   qs[16]   low four bits, laid out as in Q5_0
 * </pre>
 * A value is {@code q * d + m} with q in 0..31. Matmuls pair it with Q8_1 activations.
 */
final class Q5_1 {

    static final int BLOCK_SIZE = GgmlType.Q5_1.blockSize;
    static final int BLOCK_BYTES = GgmlType.Q5_1.bytesPerBlock;
    private static final int M = 2;
    private static final int QH = 4;
    private static final int QS = 8;

    private Q5_1() {}

    /** The values of the block at {@code xb}, into {@code dst[yb ..]}. */
    // Q5_0's reading with Q4_1's minimum.
    static void dequantizeBlock(MemorySegment src, long xb, float[] dst, int yb) {
        float d = Blocks.half(src, xb);
        float m = Blocks.half(src, xb + M);
        int qh = src.get(Blocks.INT_LE, xb + QH);
        for (int j = 0; j < BLOCK_SIZE; j++) {
            dst[yb + j] = Blocks.quant5(src, xb + QS, qh, j) * d + m;
        }
    }

    /** Weight block · Q8_1 activations, as {@link Q4_1#dot} with 5-bit quants. */
    // Q5_0's loop without the zero point (16); the minimum's term is added per block.
    static double addDot(double sum, MemorySegment w, long wb, QuantizedVector x, int b) {
        byte[] xq = x.quants;
        int xb = b * BLOCK_SIZE;
        int qh = w.get(Blocks.INT_LE, wb + QH);
        int sumi = 0;
        for (int j = 0; j < BLOCK_SIZE; j++) {
            sumi += Blocks.quant5(w, wb + QS, qh, j) * xq[xb + j];
        }
        sum += (double) (Blocks.half(w, wb) * x.scales[b]) * sumi;
        sum += Blocks.half(w, wb + M) * x.sums[b];
        return sum;
    }
}
