package dev.glimmer.engine.tensor;

import java.lang.foreign.MemorySegment;

/** Turning rows of any {@link GgmlType#dequantizable() dequantizable} type back into floats. */
public final class Dequantizer {

    private Dequantizer() {}

    /**
     * Dequantizes the {@code n} values of {@code type} stored from byte {@code byteOffset} of
     * {@code src} into {@code dst[dstOffset .. dstOffset+n)}, with ggml's float arithmetic
     * (so the results equal ggml's {@code dequantize_row_*}). n must be whole blocks.
     */
    public static void dequantizeRow(
            GgmlType type, MemorySegment src, long byteOffset, float[] dst, int dstOffset, int n) {
        Blocks.requireWholeBlocks(type, n);
        switch (type) {
            case F32 -> F32.dequantizeRow(src, byteOffset, dst, dstOffset, n);
            case F16 -> F16.dequantizeRow(src, byteOffset, dst, dstOffset, n);
            case BF16 -> BF16.dequantizeRow(src, byteOffset, dst, dstOffset, n);
            case Q4_0 -> Blocks.dequantizeRow(type, src, byteOffset, dst, dstOffset, n, Q4_0::dequantizeBlock);
            case Q4_1 -> Blocks.dequantizeRow(type, src, byteOffset, dst, dstOffset, n, Q4_1::dequantizeBlock);
            case Q5_0 -> Blocks.dequantizeRow(type, src, byteOffset, dst, dstOffset, n, Q5_0::dequantizeBlock);
            case Q5_1 -> Blocks.dequantizeRow(type, src, byteOffset, dst, dstOffset, n, Q5_1::dequantizeBlock);
            case Q8_0 -> Blocks.dequantizeRow(type, src, byteOffset, dst, dstOffset, n, Q8_0::dequantizeBlock);
            case Q4_K -> Blocks.dequantizeRow(type, src, byteOffset, dst, dstOffset, n, Q4_K::dequantizeBlock);
            case Q5_K -> Blocks.dequantizeRow(type, src, byteOffset, dst, dstOffset, n, Q5_K::dequantizeBlock);
            case Q6_K -> Blocks.dequantizeRow(type, src, byteOffset, dst, dstOffset, n, Q6_K::dequantizeBlock);
            default -> throw new IllegalArgumentException("cannot dequantize " + type.ggmlName());
        }
    }
}
