package dev.glimmer.engine.tensor;

/**
 * An activation vector in the form a matmul against one weight type consumes it: its
 * {@link VecDot#vecDotType vec_dot_type} (F32, F16, BF16, Q8_0, Q8_1 or Q8_K), quantized the
 * way llama.cpp's x86 CPU backend does. Reusable: {@link #quantize} overwrites the contents
 * and allocates only when a longer vector than ever before arrives.
 */
public final class QuantizedVector {

    private final GgmlType type;
    private int length;

    // Package-private so that the per-type dot products read them directly. Which arrays are
    // used depends on the type; the others stay empty.
    /** F32: the values. */
    float[] floats = new float[0];
    /** F16 / BF16: the raw 16-bit values. */
    short[] halves = new short[0];
    /** Q8_*: the signed 8-bit quants. */
    byte[] quants = new byte[0];
    /** Q8_*: each block's scale d, as float (Q8_0/Q8_1 store it as fp16; this is its exact value). */
    float[] scales = new float[0];
    /** Q8_1: each block's {@code s = d * Σ q}, as the exact value of its fp16. */
    float[] sums = new float[0];
    /** Q8_K: the sum of each run of 16 quants. */
    short[] blockSums = new short[0];

    /** An empty vector of {@code type}, which must be a vec_dot_type. */
    public QuantizedVector(GgmlType type) {
        switch (type) {
            case F32, F16, BF16, Q8_0, Q8_1, Q8_K -> this.type = type;
            default -> throw new IllegalArgumentException(type + " is not an activation type of any matmul");
        }
    }

    /** A vector in the type that matmuls against {@code weightType} weights use. */
    public static QuantizedVector forWeights(GgmlType weightType) {
        return new QuantizedVector(VecDot.vecDotType(weightType));
    }

    public GgmlType type() {
        return type;
    }

    /** Number of values currently held. */
    public int length() {
        return length;
    }

    /** Replaces the contents with {@code x[offset .. offset+n)}, quantized; n must be whole blocks of the type. */
    public void quantize(float[] x, int offset, int n) {
        Blocks.requireWholeBlocks(type, n);
        ensureCapacity(n);
        length = n;
        switch (type) {
            case F32 -> System.arraycopy(x, offset, floats, 0, n);
            case F16 -> F16.quantizeActivations(x, offset, n, halves);
            case BF16 -> BF16.quantizeActivations(x, offset, n, halves);
            case Q8_0 -> Q8_0.quantizeActivations(x, offset, n, quants, scales);
            case Q8_1 -> Q8_1.quantizeActivations(x, offset, n, quants, scales, sums);
            case Q8_K -> Q8_K.quantizeActivations(x, offset, n, quants, scales, blockSums);
            default -> throw new AssertionError(type);
        }
    }

    /** Q8_*: quant {@code i} (a fast backend copies the quants into its own layout). */
    public byte quant(int i) {
        return quants[i];
    }

    /** Q8_*: the scale of block {@code b}, as the exact float value of the stored fp16. */
    public float blockScale(int b) {
        return scales[b];
    }

    /** Q8_K: the sum of quants {@code 16g .. 16g+15} (a fast backend copies them into its own layout). */
    public short blockSum(int g) {
        return blockSums[g];
    }

    /** The values this vector now stands for (what the dot products see), into {@code dst[dstOffset..]}. */
    public void dequantize(float[] dst, int dstOffset) {
        for (int i = 0; i < length; i++) {
            dst[dstOffset + i] = switch (type) {
                case F32 -> floats[i];
                case F16 -> Float.float16ToFloat(halves[i]);
                case BF16 -> BF16.toFloat(halves[i]);
                case Q8_0, Q8_1, Q8_K -> scales[i / type.blockSize] * quants[i];
                default -> throw new AssertionError(type);
            };
        }
    }

    /** Grows the arrays this type uses so that they hold {@code n} values; never shrinks them. */
    private void ensureCapacity(int n) {
        int blocks = n / type.blockSize;
        switch (type) {
            case F32 -> floats = floats.length >= n ? floats : new float[n];
            case F16, BF16 -> halves = halves.length >= n ? halves : new short[n];
            case Q8_0, Q8_1, Q8_K -> {
                if (quants.length < n) {
                    quants = new byte[n];
                    scales = new float[blocks];
                    if (type == GgmlType.Q8_1) {
                        sums = new float[blocks];
                    }
                    if (type == GgmlType.Q8_K) {
                        blockSums = new short[n / 16];
                    }
                }
            }
            default -> throw new AssertionError(type);
        }
    }
}
