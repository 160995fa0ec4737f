package dev.glimmer.engine.backend.cpu;

import dev.glimmer.engine.model.WeightMatrix;
import dev.glimmer.engine.tensor.GgmlType;
import dev.glimmer.engine.tensor.QuantizedVector;
import dev.glimmer.engine.tensor.VecDot;

/**
 * Activation rows in the form a weight type's dot product consumes them, reused from call to call
 * (grown when more or wider rows come, never shrunk; nothing allocated on the decode path once warm).
 * Row i of {@code cols} values is:
 * <ul>
 *   <li>for Q4_0 and Q8_0 weights (Q8_0 activations): the quants as 16-bit integers,
 *       {@code quants[i*cols ..]}, and the block scales {@code scales[i*cols/32 ..]}, rounded by the
 *       tensor package's quantizer; for Q4_0 the quants in the grouped order of
 *       {@link Kernels#groupQ4_0Quants}, with its lane biases {@code biases[i*cols/4 ..]} and lane scales
 *       {@code laneScales[i*cols/8 ..]};</li>
 *   <li>for F32 weights with a kernel: the values, {@code floats[i*cols ..]};</li>
 *   <li>for any other type: {@code vectors[i]}, for the tensor package's scalar dots.</li>
 * </ul>
 */
final class ActivationRows {
    short[] quants = new short[0];
    float[] scales = new float[0];
    short[] biases = new short[0];
    float[] laneScales = new float[0];
    float[] floats = new float[0];
    QuantizedVector[] vectors = new QuantizedVector[0];
    private final QuantizedVector scratch = new QuantizedVector(GgmlType.Q8_0);

    /** Whether {@link Kernels} has a dot product for weights of {@code type}. */
    static boolean hasKernel(GgmlType type) {
        return Kernels.supported() && (type == GgmlType.Q4_0 || type == GgmlType.Q8_0 || type == GgmlType.F32);
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
        } else if (type == GgmlType.Q8_0) {
            if (quants.length < rows * cols) {
                quants = new short[rows * cols];
                scales = new float[rows * cols / Kernels.QK];
                biases = new short[rows * cols / 4];
                laneScales = new float[rows * cols / 8];
            }
        } else if (floats.length < rows * cols) {
            floats = new float[rows * cols];
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
            } else if (weightType == GgmlType.Q4_0) {
                scratch.quantize(x, from, cols);
                Kernels.groupQ4_0Quants(scratch, cols, quants, biases, laneScales, scales, row * cols);
            } else if (type == GgmlType.Q8_0) {
                scratch.quantize(x, from, cols);
                int q = row * cols;
                for (int i = 0; i < cols; i++) {
                    quants[q + i] = scratch.quant(i);
                }
                int s = row * cols / Kernels.QK;
                for (int b = 0; b < cols / Kernels.QK; b++) {
                    scales[s + b] = scratch.blockScale(b);
                }
            } else {
                System.arraycopy(x, from, floats, row * cols, cols);
            }
        }
    }

    /**
     * Weight row {@code r} of {@code w} · activation rows {@code i0..i3}, into {@code result[at .. at+3]}:
     * for Q4_0 the weight row is unpacked once for the four (what makes a batch cheaper per token than
     * decode), otherwise four {@link #dot}s.
     */
    void dot4(WeightMatrix w, int r, int i0, int i1, int i2, int i3, float[] result) {
        if (w.type() == GgmlType.Q4_0 && hasKernel(w.type())) {
            Kernels.dotQ4_0x4(w.data(), r * w.rowBytes(), quants, biases, laneScales, scales, w.cols() / Kernels.QK, i0, i1, i2, i3, result);
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
            case Q4_0 -> Kernels.dotQ4_0(w.data(), row, quants, biases, laneScales, scales, i * cols, cols / Kernels.QK);
            case Q8_0 -> Kernels.dotQ8_0(w.data(), row, quants, i * cols, scales, i * cols / Kernels.QK, cols / Kernels.QK);
            default -> Kernels.dotF32(w.data(), row, floats, i * cols, cols);
        };
    }
}
