package dev.glimmer.engine.tensor;

import java.lang.foreign.MemorySegment;

/**
 * Dot products of one weight row, read in place from the mapped file, with an activation
 * vector, computed the way llama.cpp's CPU matmuls compute them: the activations are first
 * rounded to the weight type's {@link #vecDotType}, then each block's products are summed
 * exactly in integers and only the block sums are scaled and added in floating point.
 *
 * <p>Each block's float factors are formed as ggml forms them (e.g. {@code fp16(d_w) * d_x}
 * rounded to float). For the K-quants and Q5_0 the scaled sums are then added exactly as llama.cpp's x86
 * kernels add them (float accumulators and fused multiply-adds, see {@link Q4_K#dot}, {@link Q5_K#dot},
 * {@link Q6_K#dot}, {@link Q5_0#dot}): their sums of nearly cancelling terms differ from the exact sum by more than a
 * float step, and matching them keeps K-quant models' logits with llama.cpp's. For the other types
 * the scaled block sums are added in double and rounded once, which is within float rounding of
 * every order ggml adds them in (8 float lanes of AVX2 vec_dot, repacked Q4_0 weights, llamafile's sgemm).
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
            case Q5_0 -> Q5_0.dot(weights, rowByteOffset, x, n);
            case Q5_1 -> Blocks.dot(weightType, weights, rowByteOffset, x, n, Q5_1::addDot);
            case Q8_0 -> Blocks.dot(weightType, weights, rowByteOffset, x, n, Q8_0::addDot);
            case Q4_K -> Q4_K.dot(weights, rowByteOffset, x, n);
            case Q5_K -> Q5_K.dot(weights, rowByteOffset, x, n);
            case Q6_K -> Q6_K.dot(weights, rowByteOffset, x, n);
            default -> throw new AssertionError(weightType);
        };
    }
}
