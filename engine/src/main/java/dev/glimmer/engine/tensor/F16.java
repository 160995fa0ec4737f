package dev.glimmer.engine.tensor;

import java.lang.foreign.MemorySegment;

/** IEEE half-precision rows. Matmuls round the activations to half precision too. */
final class F16 {

    private F16() {}

    static void dequantizeRow(MemorySegment src, long offset, float[] dst, int dstOffset, int n) {
        for (int i = 0; i < n; i++) {
            dst[dstOffset + i] = Blocks.half(src, offset + 2L * i);
        }
    }

    /** ggml-cpu's fp32 → fp16 for activations (F16C {@code vcvtps2ph}, round to nearest even). */
    static void quantizeActivations(float[] x, int offset, int n, short[] halves) {
        for (int i = 0; i < n; i++) {
            halves[i] = Float.floatToFloat16(x[offset + i]);
        }
    }

    /** Weight row · F16 activations: exact float products of the widened halves, summed in double (see {@link F32#dot}). */
    static float dot(MemorySegment w, long offset, QuantizedVector x, int n) {
        double sum = 0;
        for (int i = 0; i < n; i++) {
            sum += (double) Blocks.half(w, offset + 2L * i) * Float.float16ToFloat(x.halves[i]);
        }
        return (float) sum;
    }
}
