package dev.glimmer.engine.backend.cpu;

import dev.glimmer.engine.model.WeightMatrix;
import dev.glimmer.engine.tensor.GgmlType;
import dev.glimmer.engine.tensor.QuantizedVector;
import dev.glimmer.engine.tensor.VecDot;
import java.lang.foreign.MemorySegment;

/**
 * Activation rows in the form a weight type's dot product consumes them, reused from call to call
 * (grown when more or wider rows come, never shrunk; nothing allocated on the decode path once warm).
 * Row i of {@code cols} values is:
 * <ul>
 *   <li>for Q4_0, Q5_0 and Q8_0 weights (Q8_0 activations): the quants as 16-bit integers,
 *       {@code quants[i*cols ..]}, and the block scales {@code scales[i*cols/32 ..]}, rounded by the
 *       tensor package's quantizer; for Q4_0 the quants in the grouped order of
 *       {@link Kernels#groupQ4_0Quants}, with its lane biases {@code biases[i*cols/4 ..]} and lane scales
 *       {@code laneScales[i*cols/8 ..]};</li>
 *   <li>for Q4_K, Q5_K and Q6_K weights (Q8_K activations): the quants, {@code quants[i*cols ..]}, the
 *       super-block scales {@code scales[i*cols/256 ..]} and the sums of each 16 quants
 *       {@code blockSums[i*cols/16 ..]};</li>
 *   <li>for F32 weights: the values, {@code floats[i*cols ..]}; for F16 weights: the values rounded to F16
 *       (F16 activations) and widened back, {@code floats[i*cols ..]};</li>
 *   <li>for any other type: {@code vectors[i]}, for the tensor package's scalar dots.</li>
 * </ul>
 * With the native Q4_0 kernel ({@link NativeKernels}), Q4_0 rows are kept in its layout instead: per group
 * of four blocks, the 128 quants as bytes, each block's first 16 values and then their second 16
 * ({@code nativeQuants[i*cols ..]}), and 16 lane biases ({@code nativeBiases[i*cols/8 ..]}: lane 4k+j
 * is -8 times the sum of block k's values 4j..4j+3 and 4j+16..4j+19, the quants whose products the
 * kernel sums in that lane); the lane scales are {@code laneScales}. The blocks after the last whole
 * group keep their 32 quants in the order j, j+8, j+16, j+24 for j = 0..7 (the values of the Java
 * kernel's 8 lanes, 4 adjacent bytes each), each block's scale the first of its 4 lane scales. With the
 * native kernels of {@link NativeKernels#TYPED} types (Q4_K, Q5_K, Q6_K, Q5_0), rows for such weights keep their
 * quants as bytes instead ({@code byteQuants[i*cols ..]}; scales and sums as above). Each array a downcall reads has a memory segment
 * over it, made when the array is.
 */
final class ActivationRows {
    short[] quants = new short[0];
    float[] scales = new float[0];
    short[] biases = new short[0];
    float[] laneScales = new float[0];
    short[] blockSums = new short[0];
    float[] floats = new float[0];
    QuantizedVector[] vectors = new QuantizedVector[0];
    byte[] nativeQuants = new byte[0];
    int[] nativeBiases = new int[0];
    /** Q8_K or Q8_0 quants as bytes, for the native kernels of {@link NativeKernels#TYPED} types (in place of {@code quants}). */
    byte[] byteQuants = new byte[0];

    MemorySegment byteQuantsSegment = MemorySegment.ofArray(byteQuants);
    MemorySegment scalesSegment = MemorySegment.ofArray(scales);
    MemorySegment blockSumsSegment = MemorySegment.ofArray(blockSums);
    MemorySegment nativeQuantsSegment = MemorySegment.ofArray(nativeQuants);
    MemorySegment nativeBiasesSegment = MemorySegment.ofArray(nativeBiases);
    MemorySegment laneScalesSegment = MemorySegment.ofArray(laneScales);
    /** One activation row copied for the native quantizer (the caller's arrays have no segment of their own). */
    private float[] staging = new float[0];

    private MemorySegment stagingSegment = MemorySegment.ofArray(staging);
    /** Whether Q4_0 rows are laid out for the native kernel (instead of for the Java kernels). */
    private final boolean nativeQ4_0;

    private final QuantizedVector scratch = new QuantizedVector(GgmlType.Q8_0);
    private final QuantizedVector scratchK = new QuantizedVector(GgmlType.Q8_K);

    /** The native kernels' variant whose matmuls of {@link NativeKernels#TYPED} types these rows feed, or null for the Java kernels. */
    private final NativeKernels.Variant typedKernel;

    /**
     * Rows whose Q4_0 activations are for the Java kernels ({@code nativeQ4_0} false) or for the native kernel,
     * and whose products with {@link NativeKernels#TYPED} types are the native {@code typedKernel}'s (one with
     * {@link NativeKernels#hasTypedKernels}) or, when null, the Java kernels'.
     */
    ActivationRows(boolean nativeQ4_0, NativeKernels.Variant typedKernel) {
        this.nativeQ4_0 = nativeQ4_0;
        this.typedKernel = typedKernel;
    }

    /** Whether {@link Kernels} or {@link KQuantKernels} has a dot product for weights of {@code type}. */
    static boolean hasKernel(GgmlType type) {
        return Kernels.supported()
                && switch (type) {
                    case Q4_0, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K, F16, F32 -> true;
                    default -> false;
                };
    }

    /** Makes room for {@code rows} rows of {@code cols} values for {@code weightType} weights. */
    void reserve(GgmlType weightType, int rows, int cols) {
        GgmlType type = VecDot.vecDotType(weightType);
        if (!hasKernel(weightType)) {
            if (vectors.length < rows || vectors[0].type() != type) {
                vectors = new QuantizedVector[rows];
                for (int i = 0; i < rows; i++) {
                    vectors[i] = new QuantizedVector(type);
                }
            }
        } else if (type == GgmlType.F32 || type == GgmlType.F16) {
            if (floats.length < rows * cols) {
                floats = new float[rows * cols];
            }
        } else {
            if (quants.length < rows * cols) {
                quants = new short[rows * cols];
                scales = new float[rows * cols / Kernels.QK];
                biases = new short[rows * cols / 4];
                laneScales = new float[rows * cols / 8];
                blockSums = new short[rows * cols / 16];
                laneScalesSegment = MemorySegment.ofArray(laneScales);
                scalesSegment = MemorySegment.ofArray(scales);
                blockSumsSegment = MemorySegment.ofArray(blockSums);
            }
            if (nativeTyped(weightType) && byteQuants.length < quants.length) {
                byteQuants = new byte[quants.length];
                byteQuantsSegment = MemorySegment.ofArray(byteQuants);
            }
            if (nativeQ4_0 && weightType == GgmlType.Q4_0 && staging.length < cols) {
                staging = new float[cols];
                stagingSegment = MemorySegment.ofArray(staging);
            }
            if (nativeQ4_0 && weightType == GgmlType.Q4_0 && nativeQuants.length < quants.length) {
                nativeQuants = new byte[quants.length];
                nativeBiases = new int[quants.length / 8];
                nativeQuantsSegment = MemorySegment.ofArray(nativeQuants);
                nativeBiasesSegment = MemorySegment.ofArray(nativeBiases);
            }
        }
    }

    /**
     * Converts {@code x[xOff + t*xStride ..][0 .. cols)} for t < n into rows {@code first .. first+n-1}
     * as {@code weightType} weights need them; {@link #reserve} must have made room.
     */
    void set(GgmlType weightType, int first, float[] x, int xOff, int xStride, int n, int cols) {
        GgmlType type = VecDot.vecDotType(weightType);
        for (int t = 0; t < n; t++) {
            int row = first + t;
            int from = xOff + t * xStride;
            if (!hasKernel(weightType)) {
                vectors[row].quantize(x, from, cols);
            } else if (weightType == GgmlType.Q4_0 && nativeQ4_0) {
                System.arraycopy(x, from, staging, 0, cols);
                NativeKernels.q4_0Activations(
                        stagingSegment, cols, nativeQuantsSegment, nativeBiasesSegment, laneScalesSegment, row);
            } else if (weightType == GgmlType.Q4_0) {
                scratch.quantize(x, from, cols);
                Kernels.groupQ4_0Quants(scratch, cols, quants, biases, laneScales, scales, row * cols);
            } else if (type == GgmlType.Q8_0 || type == GgmlType.Q8_K) {
                QuantizedVector q = type == GgmlType.Q8_0 ? scratch : scratchK;
                q.quantize(x, from, cols);
                int at = row * cols;
                if (nativeTyped(weightType)) {
                    for (int i = 0; i < cols; i++) {
                        byteQuants[at + i] = (byte) q.quant(i);
                    }
                } else {
                    for (int i = 0; i < cols; i++) {
                        quants[at + i] = q.quant(i);
                    }
                }
                int blockSize = type.blockSize;
                for (int b = 0; b < cols / blockSize; b++) {
                    scales[at / blockSize + b] = q.blockScale(b);
                }
                if (type == GgmlType.Q8_K) {
                    for (int g = 0; g < cols / 16; g++) {
                        blockSums[at / 16 + g] = q.blockSum(g);
                    }
                }
            } else if (type == GgmlType.F16) {
                // Rounded to F16 as the reference's activations are, kept widened (exactly) as floats.
                for (int i = 0; i < cols; i++) {
                    floats[row * cols + i] = Float.float16ToFloat(Float.floatToFloat16(x[from + i]));
                }
            } else {
                System.arraycopy(x, from, floats, row * cols, cols);
            }
        }
    }

    /** Whether {@code w} is multiplied by a native kernel with these rows (ranges of rows at once, never {@link #dot}). */
    boolean nativeFor(WeightMatrix w) {
        return (nativeQ4_0 && w.type() == GgmlType.Q4_0) || nativeTyped(w.type());
    }

    /** Whether weights of {@code weightType} go through the native kernels of {@link NativeKernels#TYPED} types with these rows. */
    private boolean nativeTyped(GgmlType weightType) {
        return typedKernel != null && NativeKernels.TYPED.contains(weightType);
    }

    /**
     * Weight row {@code r} of {@code w} · activation rows {@code i0..i3}, into {@code result[at .. at+3]}:
     * for Q4_0 the weight row is unpacked once for each two (what makes a batch cheaper per token than
     * decode) when its blocks all go four at a time, otherwise four {@link #dot}s.
     */
    void dot4(WeightMatrix w, int r, int i0, int i1, int i2, int i3, float[] result) {
        int blocks = w.cols() / Kernels.QK;
        boolean q4_0 = w.type() == GgmlType.Q4_0 && hasKernel(w.type());
        if (q4_0 && Kernels.groupedBlocks(blocks) == blocks) {
            Kernels.dotQ4_0x2Grouped(
                    w.data(), r * w.rowBytes(), quants, biases, laneScales, scales, blocks, i0, i1, result, 0);
            Kernels.dotQ4_0x2Grouped(
                    w.data(), r * w.rowBytes(), quants, biases, laneScales, scales, blocks, i2, i3, result, 2);
        } else {
            result[0] = dot(w, r, i0);
            result[1] = dot(w, r, i1);
            result[2] = dot(w, r, i2);
            result[3] = dot(w, r, i3);
        }
    }

    /** Weight row {@code r} of {@code w} · activation row {@code i}. */
    float dot(WeightMatrix w, int r, int i) {
        int cols = w.cols();
        long row = r * w.rowBytes();
        if (!hasKernel(w.type())) {
            return VecDot.dot(w.type(), w.data(), row, vectors[i], cols);
        }
        return switch (w.type()) {
            case Q4_0 ->
                Kernels.dotQ4_0(w.data(), row, quants, biases, laneScales, scales, i * cols, cols / Kernels.QK);
            case Q5_0 -> Kernels.dotQ5_0(w.data(), row, quants, scales, i * cols, cols / Kernels.QK);
            case Q8_0 ->
                Kernels.dotQ8_0(w.data(), row, quants, i * cols, scales, i * cols / Kernels.QK, cols / Kernels.QK);
            case Q4_K ->
                KQuantKernels.dotQ4_K(w.data(), row, quants, scales, blockSums, i * cols, cols / KQuantKernels.QK_K);
            case Q5_K ->
                KQuantKernels.dotQ5_K(w.data(), row, quants, scales, blockSums, i * cols, cols / KQuantKernels.QK_K);
            case Q6_K ->
                KQuantKernels.dotQ6_K(w.data(), row, quants, scales, blockSums, i * cols, cols / KQuantKernels.QK_K);
            case F16 -> Kernels.dotF16(w.data(), row, floats, i * cols, cols);
            default -> Kernels.dotF32(w.data(), row, floats, i * cols, cols);
        };
    }
}
