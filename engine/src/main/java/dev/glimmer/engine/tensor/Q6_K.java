package dev.glimmer.engine.tensor;

import java.lang.foreign.MemorySegment;

/**
 * ggml's Q6_K: super-blocks of 256 values in 16 sub-blocks of 16, 210 bytes each:
 * <pre>
 *   u8   ql[128]     low four bits
 *   u8   qh[64]      high two bits
 *   i8   scales[16]  signed 8-bit sub-block scales
 *   fp16 d           super-block scale (last!)
 * </pre>
 * Each half of 128 values uses 64 bytes of ql and 32 of qh. Within a half, value
 * {@code 32*k + l} (k = 0..3, l = 0..31) takes its low bits from ql[l] (k = 0, 2: low/high
 * nibble) or ql[l+32] (k = 1, 3), and its high bits from bits 2k..2k+1 of qh[l].
 * A value is {@code d * scale(sub-block) * (q - 32)} with q in 0..63. Matmuls pair it with Q8_K.
 */
public final class Q6_K {

    public static final int BLOCK_SIZE = GgmlType.Q6_K.blockSize;
    public static final int BLOCK_BYTES = GgmlType.Q6_K.bytesPerBlock;
    private static final int QH = 128;
    private static final int SCALES = 192;
    public static final int D = 208;

    private Q6_K() {}

    /** The signed quant (q - 32, in -32..31) of value {@code i} (0..255) of the super-block at {@code block}. */
    private static int quant(MemorySegment s, long block, int i) {
        int half = i / 128;
        int k = (i % 128) / 32;
        int l = i % 32;
        int lowByte = Blocks.u8(s, block + half * 64 + (k % 2) * 32 + l);
        int low = k < 2 ? lowByte & 0xF : lowByte >>> 4;
        int high = (Blocks.u8(s, block + QH + half * 32 + l) >>> (2 * k)) & 3;
        return (low | high << 4) - 32;
    }

    /** Sub-block i/16's scale; value i's sub-block in memory order is simply i / 16. */
    private static int scale(MemorySegment s, long block, int i) {
        return Blocks.i8(s, block + SCALES + i / 16);
    }

    /** The values of the block at {@code xb}, into {@code dst[yb ..]}. */
    static void dequantizeBlock(MemorySegment src, long xb, float[] dst, int yb) {
        float d = Blocks.half(src, xb + D);
        for (int i = 0; i < BLOCK_SIZE; i++) {
            dst[yb + i] = d * scale(src, xb, i) * quant(src, xb, i);
        }
    }

    /** Weight block · Q8_K activations: Σ_sub scale·Σ (q-32)·x exactly per super-block, times dx·d. */
    static double addDot(double sum, MemorySegment w, long wb, QuantizedVector x, int b) {
        byte[] xq = x.quants;
        int xb = b * BLOCK_SIZE;
        int sumi = 0;
        for (int sub = 0; sub < 16; sub++) {
            int subSum = 0;
            for (int l = 0; l < 16; l++) {
                int i = sub * 16 + l;
                subSum += quant(w, wb, i) * xq[xb + i];
            }
            sumi += Blocks.i8(w, wb + SCALES + sub) * subSum;
        }
        float d = x.scales[b] * Blocks.half(w, wb + D);
        sum += (double) d * sumi;
        return sum;
    }
}
