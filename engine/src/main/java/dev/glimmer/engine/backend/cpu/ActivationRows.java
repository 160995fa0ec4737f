package dev.glimmer.engine.backend.cpu;

import dev.glimmer.engine.tensor.GgmlType;
import dev.glimmer.engine.tensor.QuantizedVector;
import dev.glimmer.engine.tensor.VecDot;

/**
 * The activation rows of one matmul in the form its weight type's dot product consumes them, reused
 * from call to call (grown when a wider or longer batch comes, never shrunk; nothing allocated on the
 * decode path once warm):
 * <ul>
 *   <li>Q8_0 (Q4_0 and Q8_0 weights): the quants as 16-bit integers, {@code quants[t*cols + i]}, and the
 *       block scales {@code scales[t*cols/32 + b]}, rounded by the tensor package's quantizer;</li>
 *   <li>F32: nothing to convert, the kernels read the caller's rows;</li>
 *   <li>any other type: a {@link QuantizedVector} per row for the tensor package's scalar dots.</li>
 * </ul>
 */
final class ActivationRows {
    short[] quants = new short[0];
    float[] scales = new float[0];
    QuantizedVector[] vectors = new QuantizedVector[0];
    private final QuantizedVector scratch = new QuantizedVector(GgmlType.Q8_0);

    /** Converts rows {@code x[xOff + t*xStride ..][0 .. cols)} for t < n as {@code weightType} weights need them. */
    void prepare(GgmlType weightType, boolean simd, float[] x, int xOff, int xStride, int n, int cols) {
        GgmlType type = VecDot.vecDotType(weightType);
        if (!simd) {
            prepareVectors(type, x, xOff, xStride, n, cols);
        } else if (type == GgmlType.Q8_0) {
            prepareQ8_0(x, xOff, xStride, n, cols);
        } else if (type != GgmlType.F32) {
            throw new IllegalArgumentException("no SIMD kernel takes " + type + " activations");
        }
    }

    private void prepareQ8_0(float[] x, int xOff, int xStride, int n, int cols) {
        if (quants.length < n * cols) {
            quants = new short[n * cols];
            scales = new float[n * cols / Kernels.QK];
        }
        for (int t = 0; t < n; t++) {
            scratch.quantize(x, xOff + t * xStride, cols);
            int q = t * cols;
            for (int i = 0; i < cols; i++) {
                quants[q + i] = scratch.quant(i);
            }
            int s = t * cols / Kernels.QK;
            for (int b = 0; b < cols / Kernels.QK; b++) {
                scales[s + b] = scratch.blockScale(b);
            }
        }
    }

    private void prepareVectors(GgmlType type, float[] x, int xOff, int xStride, int n, int cols) {
        if (vectors.length < n || vectors[0].type() != type) {
            vectors = new QuantizedVector[n];
            for (int t = 0; t < n; t++) {
                vectors[t] = new QuantizedVector(type);
            }
        }
        for (int t = 0; t < n; t++) {
            vectors[t].quantize(x, xOff + t * xStride, cols);
        }
    }
}
