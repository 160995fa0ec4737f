package dev.glimmer.engine.tensor;

import java.lang.foreign.MemorySegment;

/**
 * ggml's Q4_K: super-blocks of 256 values in 8 sub-blocks of 32, 144 bytes each:
 * <pre>
 *   fp16 d           scale of the sub-block scales
 *   fp16 dmin        scale of the sub-block minimums
 *   u8   scales[12]  eight 6-bit scales and eight 6-bit minimums, packed (see {@link #scale})
 *   u8   qs[128]     4-bit quants: 32 bytes per pair of sub-blocks, low nibbles the first
 *                    sub-block of the pair, high nibbles the second
 * </pre>
 * Value l of sub-block s is {@code d*scale(s) * q - dmin*min(s)}. Matmuls pair it with Q8_K.
 */
public final class Q4_K {

    public static final int BLOCK_SIZE = GgmlType.Q4_K.blockSize;
    public static final int BLOCK_BYTES = GgmlType.Q4_K.bytesPerBlock;
    public static final int DMIN = 2;
    public static final int SCALES = 4;
    private static final int QS = 16;

    private Q4_K() {}

    /**
     * The 6-bit scale of sub-block {@code j} (0..7) from the 12 packed bytes at {@code at}:
     * sub-blocks 0..3 keep theirs in the low 6 bits of bytes 0..3; sub-blocks 4..7 take the
     * low nibble of bytes 8..11 and, as the top two bits, the spare high bits of bytes 0..3.
     * Shared with Q5_K, which packs its scales the same way, and with the CPU kernels.
     */
    public static int scale(MemorySegment s, long at, int j) {
        if (j < 4) {
            return Blocks.u8(s, at + j) & 63;
        }
        return (Blocks.u8(s, at + j + 4) & 0xF) | (Blocks.u8(s, at + j - 4) >>> 6) << 4;
    }

    /** The 6-bit minimum of sub-block {@code j}: bytes 4..7, or high nibbles of 8..11 plus spare bits of 4..7. */
    public static int min(MemorySegment s, long at, int j) {
        if (j < 4) {
            return Blocks.u8(s, at + j + 4) & 63;
        }
        return (Blocks.u8(s, at + j + 4) >>> 4) | (Blocks.u8(s, at + j) >>> 6) << 4;
    }

    /** The 4-bit quant of value {@code i} (0..255) of the super-block at {@code block}. */
    private static int quant(MemorySegment s, long block, int i) {
        int pair = i / 64;
        int l = i % 32;
        int q = Blocks.u8(s, block + QS + pair * 32 + l);
        return (i % 64) < 32 ? q & 0xF : q >>> 4;
    }

    /** The values of the block at {@code xb}, into {@code dst[yb ..]}. */
    static void dequantizeBlock(MemorySegment src, long xb, float[] dst, int yb) {
        float d = Blocks.half(src, xb);
        float dmin = Blocks.half(src, xb + DMIN);
        for (int s = 0; s < 8; s++) {
            float ds = d * scale(src, xb + SCALES, s);
            float ms = dmin * min(src, xb + SCALES, s);
            for (int l = 0; l < 32; l++) {
                dst[yb + s * 32 + l] = ds * quant(src, xb, s * 32 + l) - ms;
            }
        }
    }

    /**
     * A row of {@code n} values at {@code offset} · Q8_K activations, as llama.cpp's CPU backend computes it on
     * x86 (Q4_K weights are repacked there and multiplied by its {@code gemv/gemm_q4_K_8x8_q8_K} kernels, which
     * keep one float lane per output). Per super-block two exact integer sums, Σ_s scale(s)·Σ q·x and
     * Σ_s min(s)·Σ x (the latter from the activation's 16-value sums), each converted to float and fused
     * multiply-added into its own float accumulator with {@code fl(d·dx)} and {@code fl(dmin·dx)}; the result is
     * the first accumulator minus the second. Rounding each accumulator on its own matters: the two nearly
     * cancel, and a sum rounded once (in double) differs from llama.cpp's by more than one float step of the
     * result.
     */
    static float dot(MemorySegment w, long offset, QuantizedVector x, int n) {
        byte[] xq = x.quants;
        float acc = 0f;
        float accMin = 0f;
        for (int b = 0; b < n / BLOCK_SIZE; b++) {
            long wb = offset + (long) b * BLOCK_BYTES;
            int xb = b * BLOCK_SIZE;
            int sumi = 0;
            int summ = 0;
            for (int s = 0; s < 8; s++) {
                int subSum = 0;
                for (int l = 0; l < 32; l++) {
                    subSum += quant(w, wb, s * 32 + l) * xq[xb + s * 32 + l];
                }
                sumi += scale(w, wb + SCALES, s) * subSum;
                summ += min(w, wb + SCALES, s) * (x.blockSums[b * 16 + 2 * s] + x.blockSums[b * 16 + 2 * s + 1]);
            }
            acc = Math.fma((float) sumi, Blocks.half(w, wb) * x.scales[b], acc);
            accMin = Math.fma((float) summ, Blocks.half(w, wb + DMIN) * x.scales[b], accMin);
        }
        return acc - accMin;
    }
}
