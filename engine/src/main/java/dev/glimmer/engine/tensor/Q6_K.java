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

    /**
     * A row of {@code n} values at {@code offset} · Q8_K activations, as llama.cpp's CPU backend computes it on
     * x86 ({@code ggml_vec_dot_q6_K_q8_K}, AVX2): per super-block, 8 exact integer lane sums, lane p holding
     * Σ scale·Σ q·x over values 4p..4p+3 of every run of 32 (q unsigned, 0..63) minus 32·(scale·Σ x) of
     * sub-blocks 2p and 2p+1 (the -32 offset of all quants, applied through the activation's 16-value sums),
     * each converted to float and fused multiply-added with {@code fl(d·dx)} into that lane's float
     * accumulator; at the end the lanes summed as {@link Blocks#sumLanes} does.
     */
    static float dot(MemorySegment w, long offset, QuantizedVector x, int n) {
        byte[] xq = x.quants;
        float[] lanes = new float[8];
        for (int b = 0; b < n / BLOCK_SIZE; b++) {
            long wb = offset + (long) b * BLOCK_BYTES;
            int xb = b * BLOCK_SIZE;
            float d = x.scales[b] * Blocks.half(w, wb + D);
            for (int p = 0; p < 8; p++) {
                int sumi = 0;
                for (int run = 0; run < 8; run++) {
                    int laneSum = 0;
                    for (int i = 32 * run + 4 * p; i < 32 * run + 4 * p + 4; i++) {
                        laneSum += (quant(w, wb, i) + 32) * xq[xb + i];
                    }
                    sumi += scale(w, wb, 32 * run + 4 * p) * laneSum;
                }
                for (int sub = 2 * p; sub < 2 * p + 2; sub++) {
                    sumi -= 32 * Blocks.i8(w, wb + SCALES + sub) * x.blockSums[b * 16 + sub];
                }
                lanes[p] = Math.fma(d, (float) sumi, lanes[p]);
            }
        }
        return Blocks.sumLanes(lanes);
    }
}
