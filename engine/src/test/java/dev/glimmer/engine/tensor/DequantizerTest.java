package dev.glimmer.engine.tensor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;

/**
 * Hand-made blocks for the formats the oracle files do not contain, with scales written as
 * literal fp16/bf16 bit patterns and expected values worked out from the ggml block layouts.
 * Each block is placed at an odd byte offset to exercise unaligned reads.
 */
class DequantizerTest {

    private static final int AT = 3; // an odd offset: blocks in GGUF files are only 2-byte aligned

    private static byte[] bytes(int size) {
        return new byte[AT + size];
    }

    private static void put16(byte[] b, int pos, int value) {
        b[AT + pos] = (byte) value;
        b[AT + pos + 1] = (byte) (value >>> 8);
    }

    private static float[] dequantize(GgmlType type, byte[] b, int n) {
        float[] out = new float[n + 2];
        Dequantizer.dequantizeRow(type, MemorySegment.ofArray(b), AT, out, 1, n);
        assertEquals(0f, out[0], "nothing written before dstOffset");
        assertEquals(0f, out[n + 1], "nothing written after n values");
        float[] values = new float[n];
        System.arraycopy(out, 1, values, 0, n);
        return values;
    }

    @Test
    void q4_1IsNibbleTimesScalePlusMin() {
        byte[] b = bytes(20);
        put16(b, 0, 0x3800); // d = 0.5
        put16(b, 2, 0xBC00); // m = -1
        for (int j = 0; j < 16; j++) {
            b[AT + 4 + j] = (byte) (j | (15 - j) << 4);
        }
        float[] v = dequantize(GgmlType.Q4_1, b, 32);
        for (int j = 0; j < 16; j++) {
            assertEquals(j * 0.5f - 1f, v[j], "value " + j);
            assertEquals((15 - j) * 0.5f - 1f, v[j + 16], "value " + (j + 16));
        }
    }

    @Test
    void q5_1TakesTheFifthBitFromQh() {
        byte[] b = bytes(24);
        put16(b, 0, 0x3400); // d = 0.25
        put16(b, 2, 0x4000); // m = 2
        int qh = 0xAAAA5555; // values 0,2,4,..,14 and 17,19,..,31 have the fifth bit
        for (int i = 0; i < 4; i++) {
            b[AT + 4 + i] = (byte) (qh >>> (8 * i));
        }
        for (int j = 0; j < 16; j++) {
            b[AT + 8 + j] = (byte) (j | (15 - j) << 4);
        }
        float[] v = dequantize(GgmlType.Q5_1, b, 32);
        for (int j = 0; j < 16; j++) {
            int q0 = j + (j % 2 == 0 ? 16 : 0);
            int q1 = (15 - j) + ((j + 16) % 2 == 1 ? 16 : 0);
            assertEquals(q0 * 0.25f + 2f, v[j], "value " + j);
            assertEquals(q1 * 0.25f + 2f, v[j + 16], "value " + (j + 16));
        }
    }

    @Test
    void q5_0CentersOn16() {
        byte[] b = bytes(22);
        put16(b, 0, 0xC000); // d = -2
        int qh = 0xFFFF0000; // the upper 16 values have the fifth bit
        for (int i = 0; i < 4; i++) {
            b[AT + 2 + i] = (byte) (qh >>> (8 * i));
        }
        for (int j = 0; j < 16; j++) {
            b[AT + 6 + j] = (byte) (j | j << 4);
        }
        float[] v = dequantize(GgmlType.Q5_0, b, 32);
        for (int j = 0; j < 16; j++) {
            assertEquals((j - 16) * -2f, v[j]);
            assertEquals((j + 16 - 16) * -2f, v[j + 16]);
        }
    }

    @Test
    void f16CoversSubnormalsInfinitiesAndSignedZero() {
        int[] bits = {0x0001, 0x03FF, 0x0400, 0x7BFF, 0x7C00, 0xFC00, 0x8000, 0x3C00, 0xC000, 0x3555};
        float[] want = {
            0x1p-24f,
            1023 * 0x1p-24f,
            0x1p-14f,
            65504f,
            Float.POSITIVE_INFINITY,
            Float.NEGATIVE_INFINITY,
            -0f,
            1f,
            -2f,
            0.33325195f
        };
        byte[] b = bytes(2 * bits.length);
        for (int i = 0; i < bits.length; i++) {
            put16(b, 2 * i, bits[i]);
        }
        float[] v = dequantize(GgmlType.F16, b, bits.length);
        for (int i = 0; i < bits.length; i++) {
            assertEquals(want[i], v[i], "fp16 0x" + Integer.toHexString(bits[i]));
        }
        put16(b, 0, 0x7E00);
        assertTrue(Float.isNaN(dequantize(GgmlType.F16, b, 1)[0]));
    }

    @Test
    void bf16IsTheTopHalfOfAFloat() {
        int[] bits = {0x3F80, 0x0001, 0x7F80, 0xFF7F, 0x8000, 0x4049};
        float[] want = {1f, 0x1p-133f, Float.POSITIVE_INFINITY, -0x1.FEp127f, -0f, 3.140625f};
        byte[] b = bytes(2 * bits.length);
        for (int i = 0; i < bits.length; i++) {
            put16(b, 2 * i, bits[i]);
        }
        float[] v = dequantize(GgmlType.BF16, b, bits.length);
        for (int i = 0; i < bits.length; i++) {
            assertEquals(want[i], v[i], "bf16 0x" + Integer.toHexString(bits[i]));
        }
    }

    @Test
    void bf16RoundingMatchesGgml() {
        assertEquals((short) 0x3F80, BF16.fromFloat(Float.intBitsToFloat(0x3F808000))); // tie, to even (down)
        assertEquals((short) 0x3F82, BF16.fromFloat(Float.intBitsToFloat(0x3F818000))); // tie, to even (up)
        assertEquals((short) 0x3F81, BF16.fromFloat(Float.intBitsToFloat(0x3F808001))); // above the tie
        assertEquals((short) 0x7FC1, BF16.fromFloat(Float.intBitsToFloat(0x7F810000))); // signalling NaN made quiet
        assertEquals((short) 0x7F80, BF16.fromFloat(Float.intBitsToFloat(0x7F7FFFFF))); // max float rounds to inf
    }

    @Test
    void q8_0ExtremeScales() {
        byte[] b = bytes(34);
        put16(b, 0, 0x7BFF); // d = 65504, the largest finite fp16
        b[AT + 2] = -128;
        b[AT + 3] = 127;
        float[] v = dequantize(GgmlType.Q8_0, b, 32);
        assertEquals(-128 * 65504f, v[0]);
        assertEquals(127 * 65504f, v[1]);
        assertEquals(0f, v[2]);

        put16(b, 0, 0x0001); // d = 2^-24, the smallest fp16 subnormal
        v = dequantize(GgmlType.Q8_0, b, 32);
        assertEquals(-128 * 0x1p-24f, v[0]);
        assertEquals(127 * 0x1p-24f, v[1]);
    }

    @Test
    void allZeroBlocksDequantizeToZero() {
        for (GgmlType type : GgmlType.values()) {
            if (!type.dequantizable()) {
                continue;
            }
            int n = Math.max(type.blockSize, 32);
            byte[] b = bytes((int) type.rowBytes(n));
            for (float v : dequantize(type, b, n)) {
                // Q4_0/Q5_0 give -0.0 here ((0 - 8) * +0.0), as ggml does: compare numerically.
                assertTrue(v == 0f, type + " gave " + v);
            }
        }
    }

    @Test
    void nonFiniteScalesPropagateAsInGgml() {
        byte[] b = bytes(18);
        put16(b, 0, 0x7C00); // Q4_0 with d = +Inf
        b[AT + 2] = (byte) 0x08; // value 0: q = 8 → 0 * Inf = NaN; value 16: q = 0 → -8 * Inf
        b[AT + 3] = (byte) 0xF9; // value 1: q = 9 → +Inf; value 17: q = 15 → +Inf
        float[] v = dequantize(GgmlType.Q4_0, b, 32);
        assertTrue(Float.isNaN(v[0]));
        assertEquals(Float.NEGATIVE_INFINITY, v[16]);
        assertEquals(Float.POSITIVE_INFINITY, v[1]);
        assertEquals(Float.POSITIVE_INFINITY, v[17]);

        put16(b, 0, 0x7E00); // d = NaN: every value is NaN
        for (float x : dequantize(GgmlType.Q4_0, b, 32)) {
            assertTrue(Float.isNaN(x));
        }
    }

    @Test
    void refusesPartialBlocksAndUnsupportedTypes() {
        byte[] b = bytes(64);
        assertThrows(IllegalArgumentException.class, () -> dequantize(GgmlType.Q4_0, b, 16));
        assertThrows(IllegalArgumentException.class, () -> dequantize(GgmlType.IQ2_XXS, b, 256));
    }

    @Test
    void referenceQuantizersRoundTripWithinHalfAStep() {
        java.util.Random random = new java.util.Random(7);
        float[] x = new float[256];
        for (int i = 0; i < x.length; i++) {
            x[i] = (float) random.nextGaussian() * (i < 128 ? 1e-3f : 50f);
        }
        float[] q8 = new float[256];
        Dequantizer.dequantizeRow(GgmlType.Q8_0, MemorySegment.ofArray(Q8_0.quantizeRow(x, 0, 256)), 0, q8, 0, 256);
        float[] q4 = new float[256];
        Dequantizer.dequantizeRow(GgmlType.Q4_0, MemorySegment.ofArray(Q4_0.quantizeRow(x, 0, 256)), 0, q4, 0, 256);
        for (int blk = 0; blk < 8; blk++) {
            float amax = Q8_0.blockAbsMax(x, blk * 32);
            for (int i = blk * 32; i < blk * 32 + 32; i++) {
                // half a step, plus the fp16 rounding of the scale (relative 2^-11 of amax)
                assertEquals(x[i], q8[i], amax / 127 * 0.5f + amax * 0x1p-11f, "q8_0 value " + i);
                assertEquals(x[i], q4[i], amax / 8 * 1.0f + amax * 0x1p-11f, "q4_0 value " + i);
            }
        }
    }
}
