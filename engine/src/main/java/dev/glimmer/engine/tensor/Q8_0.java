package dev.glimmer.engine.tensor;

import java.lang.foreign.MemorySegment;

/**
 * ggml's Q8_0: blocks of 32 values, 34 bytes each:
 * <pre>
 *   fp16 d        scale
 *   i8   qs[32]   quants
 * </pre>
 * A value is {@code q * d}. Also the activation type of Q4_0, Q5_0 and Q8_0 matmuls.
 */
public final class Q8_0 {

    public static final int BLOCK_SIZE = GgmlType.Q8_0.blockSize;
    public static final int BLOCK_BYTES = GgmlType.Q8_0.bytesPerBlock;
    private static final int QS = 2;

    private Q8_0() {}

    /** Reference quantization of {@code n} values into a new byte array of n/32 blocks. */
    public static byte[] quantizeRow(float[] x, int offset, int n) {
        Blocks.requireWholeBlocks(GgmlType.Q8_0, n);
        byte[] out = new byte[n / BLOCK_SIZE * BLOCK_BYTES];
        quantizeRow(x, offset, n, MemorySegment.ofArray(out), 0);
        return out;
    }

    /**
     * ggml's {@code quantize_row_q8_0_ref}, bit for bit (the quantizer that writes model files):
     * {@code d = amax / 127}, {@code q = roundf(x * (1/d))} with halves away from zero.
     * Matmul activations are quantized differently, see {@link #quantizeActivations}.
     */
    public static void quantizeRow(float[] x, int offset, int n, MemorySegment dst, long dstOffset) {
        Blocks.requireWholeBlocks(GgmlType.Q8_0, n);
        for (int b = 0; b < n / BLOCK_SIZE; b++) {
            int xb = offset + b * BLOCK_SIZE;
            long yb = dstOffset + (long) b * BLOCK_BYTES;
            float amax = 0f;
            for (int j = 0; j < BLOCK_SIZE; j++) {
                float a = Math.abs(x[xb + j]);
                amax = amax > a ? amax : a; // ggml's MAX macro, kept literally for NaN inputs
            }
            float d = amax / 127f;
            float id = d != 0f ? 1f / d : 0f;
            Blocks.putHalf(dst, yb, d);
            for (int j = 0; j < BLOCK_SIZE; j++) {
                Blocks.putByte(dst, yb + QS + j, (int) Blocks.roundHalfAway(x[xb + j] * id));
            }
        }
    }

    /**
     * How ggml-cpu quantizes matmul activations to Q8_0 on x86 with AVX/AVX2
     * ({@code quantize_row_q8_0} in {@code ggml-cpu/arch/x86/quants.c}), which is not the
     * reference quantizer: the multiplier is {@code 127 / amax} (not {@code 1 / (amax / 127)})
     * and rounding is to nearest with halves to even ({@code _mm256_round_ps}), not roundf.
     * The scale stored is {@code fp16(amax / 127)}; {@code scales} receives it widened to float.
     */
    static void quantizeActivations(float[] x, int offset, int n, byte[] quants, float[] scales) {
        for (int b = 0; b < n / BLOCK_SIZE; b++) {
            int xb = offset + b * BLOCK_SIZE;
            float amax = blockAbsMax(x, xb);
            scales[b] = Float.float16ToFloat(Float.floatToFloat16(amax / 127f));
            float id = amax != 0f ? 127f / amax : 0f;
            for (int j = 0; j < BLOCK_SIZE; j++) {
                quants[b * BLOCK_SIZE + j] = (byte) Math.rint(x[xb + j] * id);
            }
        }
    }

    /** The largest |x| of the 32 values at {@code from}. */
    static float blockAbsMax(float[] x, int from) {
        float amax = 0f;
        for (int j = 0; j < BLOCK_SIZE; j++) {
            amax = Math.max(amax, Math.abs(x[from + j]));
        }
        return amax;
    }

    /** The values of the block at {@code xb}, into {@code dst[yb ..]}. */
    static void dequantizeBlock(MemorySegment src, long xb, float[] dst, int yb) {
        float d = Blocks.half(src, xb);
        for (int j = 0; j < BLOCK_SIZE; j++) {
            dst[yb + j] = Blocks.i8(src, xb + QS + j) * d;
        }
    }

    /** Weight block · Q8_0 activations: an exact integer sum per block, scaled by d_w * d_x. */
    static double addDot(double sum, MemorySegment w, long wb, QuantizedVector x, int b) {
        byte[] xq = x.quants;
        int xb = b * BLOCK_SIZE;
        int sumi = 0;
        for (int j = 0; j < BLOCK_SIZE; j++) {
            sumi += Blocks.i8(w, wb + QS + j) * xq[xb + j];
        }
        sum += (double) (Blocks.half(w, wb) * x.scales[b]) * sumi;
        return sum;
    }
}
