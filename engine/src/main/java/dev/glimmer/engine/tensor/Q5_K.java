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
    // Q4_K's dequantizeBlock and addDot with 5-bit quants: the quant reader is what differs.
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

    /** Weight block · Q8_K activations, as {@link Q4_K#dot} with 5-bit quants. */
    static double addDot(double sum, MemorySegment w, long wb, QuantizedVector x, int b) {
        byte[] xq = x.quants;
        int xb = b * BLOCK_SIZE;
        int sumi = 0;
        int summ = 0;
        for (int s = 0; s < 8; s++) {
            int subSum = 0;
            for (int l = 0; l < 32; l++) {
                subSum += quant(w, wb, s * 32 + l) * xq[xb + s * 32 + l];
            }
            sumi += Q4_K.scale(w, wb + Q4_K.SCALES, s) * subSum;
            summ += Q4_K.min(w, wb + Q4_K.SCALES, s) * (x.blockSums[b * 16 + 2 * s] + x.blockSums[b * 16 + 2 * s + 1]);
        }
        float d = x.scales[b] * Blocks.half(w, wb);
        float dmin = -x.scales[b] * Blocks.half(w, wb + Q4_K.DMIN);
        sum += (double) d * sumi + (double) dmin * summ;
        return sum;
    }
}
