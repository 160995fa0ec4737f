package dev.glimmer.engine.tensor;

import java.lang.foreign.MemorySegment;

/** bfloat16 rows: the top 16 bits of a float32. Matmuls round the activations to bfloat16 too. */
final class BF16 {

    private BF16() {}

    static float toFloat(short bits) {
        return Float.intBitsToFloat((bits & 0xFFFF) << 16);
    }

    /**
     * ggml's fp32 → bf16: round to nearest even on the dropped 16 bits; a NaN keeps its top
     * bits and is forced quiet (an infinite result from rounding a finite value is kept).
     */
    static short fromFloat(float f) {
        int bits = Float.floatToRawIntBits(f);
        if ((bits & 0x7FFFFFFF) > 0x7F800000) {
            return (short) ((bits >>> 16) | 64);
        }
        return (short) ((bits + 0x7FFF + ((bits >>> 16) & 1)) >>> 16);
    }

    static void dequantizeRow(MemorySegment src, long offset, float[] dst, int dstOffset, int n) {
        for (int i = 0; i < n; i++) {
            dst[dstOffset + i] = toFloat(src.get(Blocks.SHORT_LE, offset + 2L * i));
        }
    }

    static void quantizeActivations(float[] x, int offset, int n, short[] bf16) {
        for (int i = 0; i < n; i++) {
            bf16[i] = fromFloat(x[offset + i]);
        }
    }

    /** Weight row · BF16 activations, summed in double (see {@link F32#dot}). */
    static float dot(MemorySegment w, long offset, QuantizedVector x, int n) {
        double sum = 0;
        for (int i = 0; i < n; i++) {
            sum += (double) toFloat(w.get(Blocks.SHORT_LE, offset + 2L * i)) * toFloat(x.halves[i]);
        }
        return (float) sum;
    }
}
