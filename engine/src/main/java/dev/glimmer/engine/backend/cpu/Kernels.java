package dev.glimmer.engine.backend.cpu;

import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorSpecies;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * Dot products of one weight row, read in place from the mapped file, with one activation row, in
 * SIMD lanes of the widest float vector of the CPU (8 lanes with AVX2, 16 with AVX-512).
 *
 * <p>The numerics are those of the tensor package's reference dots (which the conformance tests hold
 * against llama.cpp): Q8_0-rounded activations, kept here as floats holding the integer quants, so that
 * each lane's products and their sums within a block are exact integers (|sum| &lt; 2^24); each block's
 * lanes, scaled by {@code fp16(d_w) * d_x} (a float, as ggml forms it), are added in double lanes, and
 * the lanes summed in a fixed order at the end. Every product of a block's scale and a lane sum is exact
 * in double, so the result differs from the reference's double sum only in double rounding: the float
 * returned is the same but for a result within 1e-16 of a float rounding boundary. Float accumulation
 * measured faster, but it decides the activation near-ties of the tiny oracle models differently from
 * llama.cpp often enough to fail the conformance tests.
 */
final class Kernels {
    static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    static final int LANES = F.length();
    /** Floats in half a vector, and as many doubles: a block's lane sums are folded to half, then widened. */
    private static final VectorSpecies<Float> HALF_F = VectorSpecies.of(float.class, VectorShape.forBitSize(Math.max(64, LANES * 16)));
    private static final VectorSpecies<Double> D = VectorSpecies.of(double.class, F.vectorShape());
    /** Bytes as many as the float lanes, so that one conversion fills one float vector. */
    private static final VectorSpecies<Byte> B = VectorSpecies.of(byte.class, VectorShape.forBitSize(Math.max(64, LANES * 8)));
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    private static final ValueLayout.OfShort HALF = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(LE);
    private static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(LE);

    static final int Q4_0_BLOCK_BYTES = 18;
    static final int Q8_0_BLOCK_BYTES = 34;
    static final int QK = 32;

    private Kernels() {
    }

    /** Whether these kernels can run here: 8 or 16 float lanes (AVX2 or AVX-512 and the like). */
    static boolean supported() {
        return (LANES == 8 || LANES == 16) && B.length() == LANES && HALF_F.length() == D.length();
    }

    /**
     * Q4_0 weights (18-byte blocks: fp16 d, 16 bytes of nibbles, value j low nibble of byte j, value
     * j+16 its high nibble, each minus 8) · Q8_0 activations {@code xq} (quants as floats) with block
     * scales {@code xd}, over {@code blocks} blocks.
     */
    static float dotQ4_0(MemorySegment w, long offset, float[] xq, int xOff, float[] xd, int xdOff, int blocks) {
        DoubleVector acc = DoubleVector.zero(D);
        for (int b = 0; b < blocks; b++) {
            long wb = offset + (long) b * Q4_0_BLOCK_BYTES;
            int xb = xOff + b * QK;
            FloatVector block = FloatVector.zero(F);
            for (int j = 0; j < QK / 2; j += LANES) {
                ByteVector packed = ByteVector.fromMemorySegment(B, w, wb + 2 + j, LE);
                FloatVector lo = (FloatVector) packed.and((byte) 0x0F).sub((byte) 8).castShape(F, 0);
                FloatVector hi = (FloatVector) packed.lanewise(VectorOperators.LSHR, 4).sub((byte) 8).castShape(F, 0);
                block = lo.fma(FloatVector.fromArray(F, xq, xb + j), block);
                block = hi.fma(FloatVector.fromArray(F, xq, xb + QK / 2 + j), block);
            }
            float d = Float.float16ToFloat(w.get(HALF, wb)) * xd[xdOff + b];
            acc = scaleInto(block, d, acc);
        }
        return (float) sum(acc);
    }

    /** Q8_0 weights (34-byte blocks: fp16 d, 32 signed quants) · Q8_0 activations, as {@link #dotQ4_0}. */
    static float dotQ8_0(MemorySegment w, long offset, float[] xq, int xOff, float[] xd, int xdOff, int blocks) {
        DoubleVector acc = DoubleVector.zero(D);
        for (int b = 0; b < blocks; b++) {
            long wb = offset + (long) b * Q8_0_BLOCK_BYTES;
            int xb = xOff + b * QK;
            FloatVector block = FloatVector.zero(F);
            for (int j = 0; j < QK; j += LANES) {
                FloatVector q = (FloatVector) ByteVector.fromMemorySegment(B, w, wb + 2 + j, LE).castShape(F, 0);
                block = q.fma(FloatVector.fromArray(F, xq, xb + j), block);
            }
            float d = Float.float16ToFloat(w.get(HALF, wb)) * xd[xdOff + b];
            acc = scaleInto(block, d, acc);
        }
        return (float) sum(acc);
    }

    /** {@code acc + d · block}, the block's integer lane sums folded to half as many lanes (exactly) and widened to double. */
    private static DoubleVector scaleInto(FloatVector block, float d, DoubleVector acc) {
        FloatVector folded = ((FloatVector) block.reinterpretShape(HALF_F, 0)).add((FloatVector) block.reinterpretShape(HALF_F, 1));
        DoubleVector wide = (DoubleVector) folded.convertShape(VectorOperators.F2D, D, 0);
        return wide.fma(DoubleVector.broadcast(D, d), acc);
    }

    /** F32 weights · F32 activations: each product exact in double, summed in double lanes; {@code n} any length. */
    static float dotF32(MemorySegment w, long offset, float[] x, int xOff, int n) {
        DoubleVector acc = DoubleVector.zero(D);
        int step = D.length();
        int i = 0;
        for (; i + step <= n; i += step) {
            DoubleVector wv = (DoubleVector) FloatVector.fromMemorySegment(HALF_F, w, offset + 4L * i, LE).convertShape(VectorOperators.F2D, D, 0);
            DoubleVector xv = (DoubleVector) FloatVector.fromArray(HALF_F, x, xOff + i).convertShape(VectorOperators.F2D, D, 0);
            acc = wv.fma(xv, acc);
        }
        double sum = sum(acc);
        for (; i < n; i++) {
            sum += (double) w.get(FLOAT, offset + 4L * i) * x[xOff + i];
        }
        return (float) sum;
    }

    /**
     * The sum of the lanes in a fixed order. {@code reduceLanes} may add in another order once the JIT
     * compiles it than before, and a result must not depend on how warm the JVM is.
     */
    static double sum(DoubleVector v) {
        double s = 0;
        for (int i = 0; i < v.length(); i++) {
            s += v.lane(i);
        }
        return s;
    }
}
