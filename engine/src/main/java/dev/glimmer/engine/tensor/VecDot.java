package dev.glimmer.engine.tensor;

import java.lang.foreign.MemorySegment;

/**
 * Dot products of one weight row, read in place from the mapped file, with an activation
 * vector, computed the way llama.cpp's CPU matmuls compute them: the activations are first
 * rounded to the weight type's {@link #vecDotType}, then each block's products are summed
 * exactly in integers and only the block sums are scaled and added in floating point.
 *
 * <p>Each block's float factors are formed as ggml forms them (e.g. {@code fp16(d_w) * d_x}
 * rounded to float). ggml then adds the scaled block sums in 8 float lanes (AVX2 vec_dot),
 * in other lane layouts (repacked Q4_0/Q4_K weights, llamafile's sgemm) or in other orders
 * on other CPUs; here they are added in double and rounded once, which is within float
 * rounding of every one of those orders.
 */
public final class VecDot {

    private VecDot() {}

    /** The type llama.cpp's CPU backend converts activations to before a matmul with {@code weightType} weights. */
    public static GgmlType vecDotType(GgmlType weightType) {
        return switch (weightType) {
            case F32 -> GgmlType.F32;
            case F16 -> GgmlType.F16;
            case BF16 -> GgmlType.BF16;
            case Q4_0, Q5_0, Q8_0 -> GgmlType.Q8_0;
            case Q4_1, Q5_1 -> GgmlType.Q8_1;
            case Q4_K, Q5_K, Q6_K -> GgmlType.Q8_K;
            default -> throw new IllegalArgumentException("no matmul for " + weightType.ggmlName() + " weights");
        };
    }

    /**
     * The dot product of the {@code n} weights of {@code weightType} starting at byte
     * {@code rowByteOffset} of {@code weights} with the first n values of {@code x}, whose
     * type must be {@code vecDotType(weightType)}.
     */
    public static float dot(GgmlType weightType, MemorySegment weights, long rowByteOffset, QuantizedVector x, int n) {
        if (x.type() != vecDotType(weightType)) {
            throw new IllegalArgumentException(
                    weightType + " weights need " + vecDotType(weightType) + " activations, got " + x.type());
        }
        if (n > x.length()) {
            throw new IllegalArgumentException("dot of " + n + " values with an activation vector of " + x.length());
        }
        Blocks.requireWholeBlocks(weightType, n);
        return switch (weightType) {
            case F32 -> F32.dot(weights, rowByteOffset, x, n);
            case F16 -> F16.dot(weights, rowByteOffset, x, n);
            case BF16 -> BF16.dot(weights, rowByteOffset, x, n);
            case Q4_0 -> Blocks.dot(weightType, weights, rowByteOffset, x, n, Q4_0::addDot);
            case Q4_1 -> Blocks.dot(weightType, weights, rowByteOffset, x, n, Q4_1::addDot);
            case Q5_0 -> Blocks.dot(weightType, weights, rowByteOffset, x, n, Q5_0::addDot);
            case Q5_1 -> Blocks.dot(weightType, weights, rowByteOffset, x, n, Q5_1::addDot);
            case Q8_0 -> Blocks.dot(weightType, weights, rowByteOffset, x, n, Q8_0::addDot);
            case Q4_K -> Blocks.dot(weightType, weights, rowByteOffset, x, n, Q4_K::addDot);
            case Q5_K -> Blocks.dot(weightType, weights, rowByteOffset, x, n, Q5_K::addDot);
            case Q6_K -> Blocks.dot(weightType, weights, rowByteOffset, x, n, Q6_K::addDot);
            default -> throw new AssertionError(weightType);
        };
    }
}
