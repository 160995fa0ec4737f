package dev.glimmer.engine.tensor;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * Reading and writing the fields of ggml blocks in place. GGUF data is little-endian and
 * blocks are only 2-byte aligned (an 18-byte Q4_0 block puts the next block's scale at an
 * odd multiple of 2), so every multi-byte access uses an unaligned little-endian layout.
 */
final class Blocks {

    static final ValueLayout.OfShort SHORT_LE = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfInt INT_LE = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfFloat FLOAT_LE = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private Blocks() {}

    /** The IEEE half-precision value at {@code offset}, widened exactly to float. */
    static float half(MemorySegment s, long offset) {
        return Float.float16ToFloat(s.get(SHORT_LE, offset));
    }

    /**
     * Stores {@code value} as IEEE half precision the way ggml's reference conversion
     * ({@code GGML_FP32_TO_FP16}) does: rounded to nearest even, and any NaN written as the
     * canonical quiet NaN 0x7E00 with its sign (Java would keep the payload's top bits).
     */
    static void putHalf(MemorySegment s, long offset, float value) {
        short half = Float.isNaN(value)
                ? (short) ((Float.floatToRawIntBits(value) >>> 16 & 0x8000) | 0x7E00)
                : Float.floatToFloat16(value);
        s.set(SHORT_LE, offset, half);
    }

    /** The unsigned byte at {@code offset}. */
    static int u8(MemorySegment s, long offset) {
        return Byte.toUnsignedInt(s.get(ValueLayout.JAVA_BYTE, offset));
    }

    /**
     * The 5-bit quant of value {@code j} (0..31) of a Q5_0 or Q5_1 block: the low four bits from the
     * nibbles at {@code qs} (value j in the low nibble of byte j, j+16 in its high one), bit 4 from {@code highBits}.
     */
    static int quant5(MemorySegment s, long qs, int highBits, int j) {
        int nibbles = u8(s, qs + (j & 15));
        int low = j < 16 ? nibbles & 0xF : nibbles >>> 4;
        return low | ((highBits >>> j) & 1) << 4;
    }

    /** The signed byte at {@code offset}. */
    static int i8(MemorySegment s, long offset) {
        return s.get(ValueLayout.JAVA_BYTE, offset);
    }

    static void putByte(MemorySegment s, long offset, int value) {
        s.set(ValueLayout.JAVA_BYTE, offset, (byte) value);
    }

    /**
     * C's {@code roundf}: to the nearest integer, halves away from zero (Java's Math.round
     * rounds halves up, which differs for negative halves). Exact in double for any float.
     */
    static float roundHalfAway(float x) {
        return (float) Math.copySign(Math.floor(Math.abs((double) x) + 0.5), x);
    }

    /** One block of a format: its values written into {@code dst[at ..]}. */
    interface BlockDequantizer {
        void dequantizeBlock(MemorySegment src, long block, float[] dst, int at);
    }

    /** One block of a format: {@code sum} plus its dot product with block {@code b} of the activations. */
    interface BlockDot {
        double addDot(double sum, MemorySegment w, long block, QuantizedVector x, int b);
    }

    /** The {@code n} values of a row of {@code type} at {@code offset}, block by block, into {@code dst[dstOffset ..]}. */
    static void dequantizeRow(
            GgmlType type, MemorySegment src, long offset, float[] dst, int dstOffset, int n, BlockDequantizer format) {
        for (int b = 0; b < n / type.blockSize; b++) {
            format.dequantizeBlock(src, offset + (long) b * type.bytesPerBlock, dst, dstOffset + b * type.blockSize);
        }
    }

    /**
     * The dot product of a row of {@code n} values of {@code type} at {@code offset} with {@code x}: the blocks'
     * products summed in double, in order, then rounded to float once.
     */
    static float dot(GgmlType type, MemorySegment w, long offset, QuantizedVector x, int n, BlockDot format) {
        double sum = 0;
        for (int b = 0; b < n / type.blockSize; b++) {
            sum = format.addDot(sum, w, offset + (long) b * type.bytesPerBlock, x, b);
        }
        return (float) sum;
    }

    /**
     * llama.cpp's horizontal sum of the 8 float lanes of its x86 dot products ({@code hsum_float_8}, llamafile's
     * {@code hsum}): lanes i and i+4 added, then (0+2) + (1+3) of those.
     */
    static float sumLanes(float[] lanes) {
        float r0 = lanes[4] + lanes[0];
        float r1 = lanes[5] + lanes[1];
        float r2 = lanes[6] + lanes[2];
        float r3 = lanes[7] + lanes[3];
        return (r0 + r2) + (r1 + r3);
    }

    /** Checks that {@code n} values form whole blocks of {@code type}. */
    static void requireWholeBlocks(GgmlType type, int n) {
        if (n % type.blockSize != 0) {
            throw new IllegalArgumentException(type + " rows must be a multiple of " + type.blockSize + ", got " + n);
        }
    }
}
