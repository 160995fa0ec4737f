package dev.glimmer.engine.tensor;

import java.lang.foreign.MemorySegment;

/**
 * ggml's Q5_K: super-blocks of 256 values in 8 sub-blocks of 32, 176 bytes each:
 * <pre>
 *   fp16 d           scale of the sub-block scales
 *   fp16 dmin        scale of the sub-block minimums
 *   u8   scales[12]  packed 6-bit scales and minimums, exactly as in Q4_K
 *   u8   qh[32]      fifth bits: bit s of byte l belongs to value l of sub-block s
 *   u8   qs[128]     low four bits, laid out as in Q4_K
 * </pre>
 * Value l of sub-block s is {@code d*scale(s) * q - dmin*min(s)}, q in 0..31. Matmuls pair it with Q8_K.
 */
public final class Q5_K {

    public static final int BLOCK_SIZE = GgmlType.Q5_K.blockSize;
    public static final int BLOCK_BYTES = GgmlType.Q5_K.bytesPerBlock;
    private static final int QH = 16;
    private static final int QS = 48;

    private Q5_K() {}

    /** The 5-bit quant of value {@code i} (0..255) of the super-block at {@code block}. */
    private static int quant(MemorySegment s, long block, int i) {
        int sub = i / 32;
        int l = i % 32;
        int nibbles = Blocks.u8(s, block + QS + (sub / 2) * 32 + l);
        int low = sub % 2 == 0 ? nibbles & 0xF : nibbles >>> 4;
        int high = (Blocks.u8(s, block + QH + l) >>> sub) & 1;
        return low | high << 4;
    }

    /** The values of the block at {@code xb}, into {@code dst[yb ..]}. */
    // Q4_K's dequantizeBlock with 5-bit quants: the quant reader is what differs.
    static void dequantizeBlock(MemorySegment src, long xb, float[] dst, int yb) {
        float d = Blocks.half(src, xb);
        float dmin = Blocks.half(src, xb + Q4_K.DMIN);
        for (int s = 0; s < 8; s++) {
            float ds = d * Q4_K.scale(src, xb + Q4_K.SCALES, s);
            float ms = dmin * Q4_K.min(src, xb + Q4_K.SCALES, s);
            for (int l = 0; l < 32; l++) {
                dst[yb + s * 32 + l] = ds * quant(src, xb, s * 32 + l) - ms;
            }
        }
    }

    /**
     * A row of {@code n} values at {@code offset} · Q8_K activations, as llama.cpp's CPU backend computes it on
     * x86 ({@code ggml_vec_dot_q5_K_q8_K}, AVX2): per super-block, 8 exact integer lane sums, lane p holding
     * Σ_s scale(s)·Σ q·x over values 4p..4p+3 of every sub-block, each converted to float and fused
     * multiply-added with {@code fl(d·dx)} into that lane's float accumulator; the minimums' exact sum
     * Σ_s min(s)·Σ x fused multiply-added with {@code fl(-dmin·dx)} into one more float; at the end the lanes
     * summed as {@link Blocks#sumLanes} does, plus that float.
     */
    static float dot(MemorySegment w, long offset, QuantizedVector x, int n) {
        byte[] xq = x.quants;
        float[] lanes = new float[8];
        float mins = 0f;
        for (int b = 0; b < n / BLOCK_SIZE; b++) {
            long wb = offset + (long) b * BLOCK_BYTES;
            int xb = b * BLOCK_SIZE;
            float d = x.scales[b] * Blocks.half(w, wb);
            for (int p = 0; p < 8; p++) {
                int sumi = 0;
                for (int s = 0; s < 8; s++) {
                    int laneSum = 0;
                    for (int l = 4 * p; l < 4 * p + 4; l++) {
                        laneSum += quant(w, wb, s * 32 + l) * xq[xb + s * 32 + l];
                    }
                    sumi += Q4_K.scale(w, wb + Q4_K.SCALES, s) * laneSum;
                }
                lanes[p] = Math.fma(d, (float) sumi, lanes[p]);
            }
            int summ = 0;
            for (int s = 0; s < 8; s++) {
                summ += Q4_K.min(w, wb + Q4_K.SCALES, s)
                        * (x.blockSums[b * 16 + 2 * s] + x.blockSums[b * 16 + 2 * s + 1]);
            }
            mins = Math.fma(-x.scales[b] * Blocks.half(w, wb + Q4_K.DMIN), (float) summ, mins);
        }
        return Blocks.sumLanes(lanes) + mins;
    }
}
