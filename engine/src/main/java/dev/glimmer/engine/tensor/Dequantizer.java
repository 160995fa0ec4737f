package dev.glimmer.engine.tensor;

import java.lang.foreign.MemorySegment;

/** Turning rows of any {@link GgmlType#dequantizable() dequantizable} type back into floats. */
public final class Dequantizer {

    private Dequantizer() {
    }

    /**
     * Dequantizes the {@code n} values of {@code type} stored from byte {@code byteOffset} of
     * {@code src} into {@code dst[dstOffset .. dstOffset+n)}, with ggml's float arithmetic
     * (so the results equal ggml's {@code dequantize_row_*}). n must be whole blocks.
     */
    public static void dequantizeRow(GgmlType type, MemorySegment src, long byteOffset, float[] dst, int dstOffset, int n) {
        Blocks.requireWholeBlocks(type, n);
        switch (type) {
            case F32 -> F32.dequantizeRow(src, byteOffset, dst, dstOffset, n);
            case F16 -> F16.dequantizeRow(src, byteOffset, dst, dstOffset, n);
            case BF16 -> BF16.dequantizeRow(src, byteOffset, dst, dstOffset, n);
            case Q4_0 -> Q4_0.dequantizeRow(src, byteOffset, dst, dstOffset, n);
            case Q4_1 -> Q4_1.dequantizeRow(src, byteOffset, dst, dstOffset, n);
            case Q5_0 -> Q5_0.dequantizeRow(src, byteOffset, dst, dstOffset, n);
            case Q5_1 -> Q5_1.dequantizeRow(src, byteOffset, dst, dstOffset, n);
            case Q8_0 -> Q8_0.dequantizeRow(src, byteOffset, dst, dstOffset, n);
            case Q4_K -> Q4_K.dequantizeRow(src, byteOffset, dst, dstOffset, n);
            case Q5_K -> Q5_K.dequantizeRow(src, byteOffset, dst, dstOffset, n);
            case Q6_K -> Q6_K.dequantizeRow(src, byteOffset, dst, dstOffset, n);
            default -> throw new IllegalArgumentException("cannot dequantize " + type.ggmlName());
        }
    }
}
