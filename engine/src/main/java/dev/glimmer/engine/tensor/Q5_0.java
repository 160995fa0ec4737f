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

    /**
     * A row of {@code n} values at {@code offset} · Q8_0 activations, as llama.cpp's CPU backend computes it on
     * x86 (ggml_vec_dot_q5_0_q8_0 with AVX2 for one token, llamafile's tinyBLAS_Q0_AVX for several: the same
     * arithmetic): per block, 8 exact integer lane sums, lane p of values 4p..4p+3, each converted to float and
     * fused multiply-added with {@code fl(d_w·d_x)} into that lane's float accumulator; at the end the lanes
     * summed as {@link Blocks#sumLanes} does.
     */
    static float dot(MemorySegment w, long offset, QuantizedVector x, int n) {
        byte[] xq = x.quants;
        float[] lanes = new float[8];
        for (int b = 0; b < n / BLOCK_SIZE; b++) {
            long wb = offset + (long) b * BLOCK_BYTES;
            int xb = b * BLOCK_SIZE;
            int qh = w.get(Blocks.INT_LE, wb + QH);
            float d = Blocks.half(w, wb) * x.scales[b];
            for (int p = 0; p < 8; p++) {
                int sumi = 0;
                for (int j = 4 * p; j < 4 * p + 4; j++) {
                    sumi += (Blocks.quant5(w, wb + QS, qh, j) - 16) * xq[xb + j];
                }
                lanes[p] = Math.fma(d, (float) sumi, lanes[p]);
            }
        }
        return Blocks.sumLanes(lanes);
    }
}
