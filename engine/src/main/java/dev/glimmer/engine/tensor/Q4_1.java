package dev.glimmer.engine.tensor;

import java.lang.foreign.MemorySegment;

/**
 * ggml's Q4_1: blocks of 32 values, 20 bytes each:
 * <pre>
 *   fp16 d        scale
 *   fp16 m        minimum
 *   u8   qs[16]   byte j holds value j in its low nibble and value j+16 in its high nibble
 * </pre>
 * A value is {@code q * d + m} with q in 0..15. Matmuls pair it with Q8_1 activations.
 */
final class Q4_1 {

    static final int BLOCK_SIZE = GgmlType.Q4_1.blockSize;
    static final int BLOCK_BYTES = GgmlType.Q4_1.bytesPerBlock;
    private static final int M = 2;
    private static final int QS = 4;

    private Q4_1() {}

    /** The values of the block at {@code xb}, into {@code dst[yb ..]}. */
    static void dequantizeBlock(MemorySegment src, long xb, float[] dst, int yb) {
        float d = Blocks.half(src, xb);
        float m = Blocks.half(src, xb + M);
        for (int j = 0; j < BLOCK_SIZE / 2; j++) {
            int q = Blocks.u8(src, xb + QS + j);
            dst[yb + j] = (q & 0xF) * d + m;
            dst[yb + j + BLOCK_SIZE / 2] = (q >>> 4) * d + m;
        }
    }

    /**
     * Weight block · Q8_1 activations. Per block Σ (q·d + m)·(x·dx) = d·dx·Σ q·x + m·(dx·Σ x);
     * the last factor is the activation block's precomputed sum s.
     */
    // Q4_0's nibble loop without the zero point; the minimum's term is added per block.
    static double addDot(double sum, MemorySegment w, long wb, QuantizedVector x, int b) {
        byte[] xq = x.quants;
        int xb = b * BLOCK_SIZE;
        int sumi = 0;
        for (int j = 0; j < BLOCK_SIZE / 2; j++) {
            int q = Blocks.u8(w, wb + QS + j);
            sumi += (q & 0xF) * xq[xb + j] + (q >>> 4) * xq[xb + j + BLOCK_SIZE / 2];
        }
        sum += (double) (Blocks.half(w, wb) * x.scales[b]) * sumi;
        sum += Blocks.half(w, wb + M) * x.sums[b];
        return sum;
    }
}
