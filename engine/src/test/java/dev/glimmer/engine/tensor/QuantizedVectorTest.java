package dev.glimmer.engine.tensor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;
import org.junit.jupiter.api.Test;

/** Activation quantization as ggml-cpu does it on x86 AVX2 (ggml-cpu/arch/x86/quants.c). */
class QuantizedVectorTest {

    /** The vec_dot_type column of ggml-cpu.c's type_traits_cpu table, for the types Glimmer supports. */
    @Test
    void activationTypesFollowGgmlCpu() {
        assertEquals(GgmlType.F32, VecDot.vecDotType(GgmlType.F32));
        assertEquals(GgmlType.F16, VecDot.vecDotType(GgmlType.F16));
        assertEquals(GgmlType.BF16, VecDot.vecDotType(GgmlType.BF16));
        for (GgmlType t : new GgmlType[] {GgmlType.Q4_0, GgmlType.Q5_0, GgmlType.Q8_0}) {
            assertEquals(GgmlType.Q8_0, VecDot.vecDotType(t), t.toString());
        }
        assertEquals(GgmlType.Q8_1, VecDot.vecDotType(GgmlType.Q4_1));
        assertEquals(GgmlType.Q8_1, VecDot.vecDotType(GgmlType.Q5_1));
        for (GgmlType t : new GgmlType[] {GgmlType.Q4_K, GgmlType.Q5_K, GgmlType.Q6_K}) {
            assertEquals(GgmlType.Q8_K, VecDot.vecDotType(t), t.toString());
        }
        assertThrows(IllegalArgumentException.class, () -> VecDot.vecDotType(GgmlType.IQ2_XXS));
    }

    /** A block whose largest magnitude is 127: d = 1 and 127/amax = 1, so x*id = x and halves are exact ties. */
    private static float[] tiesBlock() {
        float[] x = new float[32];
        float[] head = {127f, 2.5f, -2.5f, 3.5f, 0.5f, -0.5f, 1.5f, -126.5f};
        System.arraycopy(head, 0, x, 0, head.length);
        return x;
    }

    @Test
    void q8_0ActivationsRoundHalvesToEvenUnlikeTheReferenceQuantizer() {
        QuantizedVector v = new QuantizedVector(GgmlType.Q8_0);
        v.quantize(tiesBlock(), 0, 32);
        int[] want = {127, 2, -2, 4, 0, 0, 2, -126};
        for (int i = 0; i < want.length; i++) {
            assertEquals(want[i], v.quants[i], "value " + i);
        }
        assertEquals(1f, v.scales[0]);

        byte[] reference = Q8_0.quantizeRow(tiesBlock(), 0, 32); // roundf: halves away from zero
        int[] referenceWant = {127, 3, -3, 4, 1, -1, 2, -127};
        for (int i = 0; i < referenceWant.length; i++) {
            assertEquals(referenceWant[i], reference[2 + i], "reference value " + i);
        }
    }

    @Test
    void q8_0ActivationsMultiplyBy127OverAmax() {
        // Found by search: x * (127/amax) = 120.49999 but x * (1/(amax/127)) = 120.50001.
        float amax = 1.5271802f;
        float x = 1.4490174f;
        float[] block = new float[32];
        block[0] = amax;
        block[1] = x;
        QuantizedVector v = new QuantizedVector(GgmlType.Q8_0);
        v.quantize(block, 0, 32);
        assertEquals(120, v.quants[1]);
        assertEquals(121, Q8_0.quantizeRow(block, 0, 32)[3], "the reference formula rounds the other way");
        assertEquals(Float.float16ToFloat(Float.floatToFloat16(amax / 127f)), v.scales[0]);
    }

    @Test
    void q8_1AlsoKeepsTheFp16OfDTimesTheQuantSum() {
        QuantizedVector v = new QuantizedVector(GgmlType.Q8_1);
        float[] x = new float[64];
        System.arraycopy(tiesBlock(), 0, x, 0, 32);
        for (int i = 32; i < 64; i++) {
            x[i] = 0.01f * (i - 40);
        }
        v.quantize(x, 0, 64);
        assertEquals(127 + 2 - 2 + 4 + 2 - 126, v.sums[0]); // d = 1
        int sum = 0;
        for (int i = 32; i < 64; i++) {
            sum += v.quants[i];
        }
        // d is the float amax/127 before its own rounding to fp16; s is rounded to fp16 once.
        assertEquals(Float.float16ToFloat(Float.floatToFloat16(0.23f / 127f * sum)), v.sums[1]);
    }

    @Test
    void q8_KScalesByMinus127OverTheLargestValue() {
        float[] x = new float[512];
        Random random = new Random(3);
        for (int i = 0; i < 256; i++) {
            x[i] = (float) random.nextGaussian();
        }
        x[77] = 9f; // the largest magnitude of block 0 is positive: its quant is -127, d < 0
        // block 1 stays all zero
        QuantizedVector v = new QuantizedVector(GgmlType.Q8_K);
        v.quantize(x, 0, 512);
        assertEquals(-127, v.quants[77]);
        assertEquals(1f / (-127f / 9f), v.scales[0]);
        assertTrue(v.scales[0] < 0);
        float[] back = new float[512];
        v.dequantize(back, 0);
        for (int i = 0; i < 256; i++) {
            assertEquals(x[i], back[i], Math.abs(v.scales[0]) * 0.5f * 1.0001f, "value " + i);
        }
        for (int g = 0; g < 32; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) {
                sum += v.quants[g * 16 + j];
            }
            assertEquals(sum, v.blockSums[g], "sum of group " + g);
        }
        assertEquals(0f, v.scales[1]);
        for (int i = 256; i < 512; i++) {
            assertEquals(0, v.quants[i]);
        }
    }

    @Test
    void q8_KRoundsHalvesToEven() {
        float[] x = new float[256];
        x[0] = -127f; // iscale = -127 / -127 = 1: quants are x itself, rounded
        x[1] = 2.5f;
        x[2] = 3.5f;
        x[3] = -0.5f;
        QuantizedVector v = new QuantizedVector(GgmlType.Q8_K);
        v.quantize(x, 0, 256);
        assertEquals(-127, v.quants[0]);
        assertEquals(2, v.quants[1]);
        assertEquals(4, v.quants[2]);
        assertEquals(0, v.quants[3]);
        assertEquals(1f, v.scales[0]);
    }

    @Test
    void f16AndBf16ActivationsRoundToNearestEven() {
        float tie = 1f + 0x1p-11f; // halfway between fp16 1.0 and 1.0 + 2^-10
        float[] x = {tie, 1f + 3 * 0x1p-11f, 70000f, 1e-6f};
        QuantizedVector f16 = new QuantizedVector(GgmlType.F16);
        f16.quantize(x, 0, 4);
        float[] back = new float[4];
        f16.dequantize(back, 0);
        assertEquals(1f, back[0]);
        assertEquals(1f + 4 * 0x1p-11f, back[1]);
        assertEquals(Float.POSITIVE_INFINITY, back[2]);
        assertEquals(17 * 0x1p-24f, back[3]); // a subnormal: 1e-6 = 16.78 * 2^-24

        QuantizedVector bf16 = new QuantizedVector(GgmlType.BF16);
        bf16.quantize(new float[] {1f + 0x1p-8f, 1f + 3 * 0x1p-8f}, 0, 2);
        bf16.dequantize(back, 0);
        assertEquals(1f, back[0]);
        assertEquals(1f + 4 * 0x1p-8f, back[1]);
    }

    @Test
    void reusesItsBuffersOnceSized() {
        QuantizedVector v = QuantizedVector.forWeights(GgmlType.Q4_K);
        float[] x = new float[1024];
        v.quantize(x, 0, 1024);
        byte[] quants = v.quants;
        v.quantize(x, 256, 512);
        assertEquals(512, v.length());
        assertSame(quants, v.quants);
        assertThrows(IllegalArgumentException.class, () -> v.quantize(x, 0, 100));
    }
}
