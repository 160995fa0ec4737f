package dev.glimmer.engine.tensor;

import java.lang.foreign.MemorySegment;

/** Plain little-endian float32 rows. Matmuls use F32 activations with them. */
final class F32 {

    private F32() {}

    static void dequantizeRow(MemorySegment src, long offset, float[] dst, int dstOffset, int n) {
        MemorySegment.copy(src, Blocks.FLOAT_LE, offset, dst, dstOffset, n);
    }

    /**
     * Weight row · F32 activations. Products are summed in double, then rounded once: ggml
     * sums in several float lanes whose number depends on the CPU, so no single float order
     * is "the" llama.cpp result; the double sum is within float rounding of all of them.
     */
    static float dot(MemorySegment w, long offset, QuantizedVector x, int n) {
        double sum = 0;
        for (int i = 0; i < n; i++) {
            sum += (double) w.get(Blocks.FLOAT_LE, offset + 4L * i) * x.floats[i];
        }
        return (float) sum;
    }
}
