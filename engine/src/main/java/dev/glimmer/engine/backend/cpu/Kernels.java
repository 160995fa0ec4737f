package dev.glimmer.engine.backend.cpu;

import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * Dot products of one weight row, read in place from the mapped file, with one activation row, with
 * the Vector API.
 *
 * <p>The numerics are those of the tensor package's reference dots, which the conformance tests hold
 * against llama.cpp: activations rounded to Q8_0 (kept here as 16-bit integers); within a block of 32
 * the weight and activation quants are multiplied and summed exactly in integer lanes (16-bit lanes hold
 * 2 products; Q4_0's, |q_w·q_x| ≤ 1016, are folded to 4 or 8 per lane there, Q8_0's, up to 127·127, are
 * widened to 32 bits first); each block's lane sums are
 * scaled by {@code fp16(d_w) * d_x} (a float, as ggml forms it) in double lanes, exact there, and the
 * lanes summed in a fixed order at the end. So the result differs from the reference's double sum only
 * by double rounding. Float accumulation measured ~40 % faster, but its rounding decides near-ties of
 * the tiny oracle models' activations differently from llama.cpp often enough to fail the conformance
 * tests.
 *
 * <p>The code is written out flat in each kernel (no helper calls): C2 intrinsifies a Vector API
 * operation only when it can inline the whole chain of library methods behind it, and a kernel inlined
 * into its caller with helpers of its own runs past the inlining depth limit, leaving some operations as
 * (very slow) Java fallbacks.
 */
final class Kernels {
    /** 16 shorts: the 16 packed bytes of a Q4_0 block, or half of a Q8_0 block. */
    private static final VectorSpecies<Short> S = ShortVector.SPECIES_256;
    /** Double lanes of the widest vector (8 with AVX-512, 4 with AVX2); block sums are folded to as many lanes. */
    private static final VectorSpecies<Double> D = DoubleVector.SPECIES_PREFERRED;
    private static final VectorSpecies<Float> HALF_D = D.length() == 8 ? FloatVector.SPECIES_256 : FloatVector.SPECIES_128;
    private static final VectorSpecies<Byte> B = ByteVector.SPECIES_128;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    private static final ValueLayout.OfShort HALF = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(LE);
    private static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(LE);

    static final int Q4_0_BLOCK_BYTES = 18;
    static final int Q8_0_BLOCK_BYTES = 34;
    static final int QK = 32;

    private Kernels() {
    }

    /** Whether these kernels can run here: 256-bit vectors at least (AVX2, AVX-512, SVE-256 and the like). */
    static boolean supported() {
        return D.length() == 4 || D.length() == 8;
    }

    /**
     * Q4_0 weights (18-byte blocks: fp16 d, 16 bytes of nibbles, value j the low nibble of byte j, value
     * j+16 its high nibble, each minus 8) · Q8_0 activations {@code xq} with block scales {@code xd},
     * over {@code blocks} blocks.
     */
    static float dotQ4_0(MemorySegment w, long offset, short[] xq, int xOff, float[] xd, int xdOff, int blocks) {
        DoubleVector acc = DoubleVector.zero(D);
        for (int b = 0; b < blocks; b++) {
            long wb = offset + (long) b * Q4_0_BLOCK_BYTES;
            int xb = xOff + b * QK;
            ShortVector packed = (ShortVector) ByteVector.fromMemorySegment(B, w, wb + 2, LE)
                    .convertShape(VectorOperators.ZERO_EXTEND_B2S, S, 0);
            ShortVector lo = packed.and((short) 0x0F).sub((short) 8);
            ShortVector hi = packed.lanewise(VectorOperators.LSHR, 4).sub((short) 8);
            ShortVector block = lo.mul(ShortVector.fromArray(S, xq, xb)).add(hi.mul(ShortVector.fromArray(S, xq, xb + QK / 2)));
            ShortVector folded = ((ShortVector) block.reinterpretShape(ShortVector.SPECIES_128, 0))
                    .add((ShortVector) block.reinterpretShape(ShortVector.SPECIES_128, 1));
            if (D.length() == 4) {
                folded = ((ShortVector) folded.reinterpretShape(ShortVector.SPECIES_64, 0))
                        .add((ShortVector) folded.reinterpretShape(ShortVector.SPECIES_64, 1));
            }
            float d = Float.float16ToFloat(w.get(HALF, wb)) * xd[xdOff + b];
            acc = ((DoubleVector) folded.convertShape(VectorOperators.S2D, D, 0)).fma(DoubleVector.broadcast(D, d), acc);
        }
        // The lanes summed in a fixed order (halves added lane-wise): reduceLanes may add in another order
        // once compiled than before, and a result must not depend on how warm the JVM is.
        if (D.length() == 8) {
            acc = ((DoubleVector) acc.reinterpretShape(DoubleVector.SPECIES_256, 0)).add((DoubleVector) acc.reinterpretShape(DoubleVector.SPECIES_256, 1));
        }
        DoubleVector pair = ((DoubleVector) acc.reinterpretShape(DoubleVector.SPECIES_128, 0)).add((DoubleVector) acc.reinterpretShape(DoubleVector.SPECIES_128, 1));
        return (float) (pair.lane(0) + pair.lane(1));
    }

    /**
     * {@link #dotQ4_0} of one weight row with 4 activation rows at once (rows {@code x0..x3} of
     * {@code xq}/{@code xd}, {@code cols = 32·blocks} values each), into {@code result[0..3]}: each weight
     * block is unpacked once for the 4 tokens, which halves the work per token of a batch. The numerics
     * per token are those of {@link #dotQ4_0}, operation for operation.
     */
    static void dotQ4_0x4(MemorySegment w, long offset, short[] xq, float[] xd, int blocks,
                          int x0, int x1, int x2, int x3, float[] result) {
        int cols = blocks * QK;
        DoubleVector acc0 = DoubleVector.zero(D);
        DoubleVector acc1 = DoubleVector.zero(D);
        DoubleVector acc2 = DoubleVector.zero(D);
        DoubleVector acc3 = DoubleVector.zero(D);
        for (int b = 0; b < blocks; b++) {
            long wb = offset + (long) b * Q4_0_BLOCK_BYTES;
            ShortVector packed = (ShortVector) ByteVector.fromMemorySegment(B, w, wb + 2, LE)
                    .convertShape(VectorOperators.ZERO_EXTEND_B2S, S, 0);
            ShortVector lo = packed.and((short) 0x0F).sub((short) 8);
            ShortVector hi = packed.lanewise(VectorOperators.LSHR, 4).sub((short) 8);
            float dw = Float.float16ToFloat(w.get(HALF, wb));
            int xb = b * QK;

            ShortVector p0 = lo.mul(ShortVector.fromArray(S, xq, x0 * cols + xb)).add(hi.mul(ShortVector.fromArray(S, xq, x0 * cols + xb + QK / 2)));
            ShortVector p1 = lo.mul(ShortVector.fromArray(S, xq, x1 * cols + xb)).add(hi.mul(ShortVector.fromArray(S, xq, x1 * cols + xb + QK / 2)));
            ShortVector p2 = lo.mul(ShortVector.fromArray(S, xq, x2 * cols + xb)).add(hi.mul(ShortVector.fromArray(S, xq, x2 * cols + xb + QK / 2)));
            ShortVector p3 = lo.mul(ShortVector.fromArray(S, xq, x3 * cols + xb)).add(hi.mul(ShortVector.fromArray(S, xq, x3 * cols + xb + QK / 2)));
            ShortVector f0 = ((ShortVector) p0.reinterpretShape(ShortVector.SPECIES_128, 0)).add((ShortVector) p0.reinterpretShape(ShortVector.SPECIES_128, 1));
            ShortVector f1 = ((ShortVector) p1.reinterpretShape(ShortVector.SPECIES_128, 0)).add((ShortVector) p1.reinterpretShape(ShortVector.SPECIES_128, 1));
            ShortVector f2 = ((ShortVector) p2.reinterpretShape(ShortVector.SPECIES_128, 0)).add((ShortVector) p2.reinterpretShape(ShortVector.SPECIES_128, 1));
            ShortVector f3 = ((ShortVector) p3.reinterpretShape(ShortVector.SPECIES_128, 0)).add((ShortVector) p3.reinterpretShape(ShortVector.SPECIES_128, 1));
            if (D.length() == 4) {
                f0 = ((ShortVector) f0.reinterpretShape(ShortVector.SPECIES_64, 0)).add((ShortVector) f0.reinterpretShape(ShortVector.SPECIES_64, 1));
                f1 = ((ShortVector) f1.reinterpretShape(ShortVector.SPECIES_64, 0)).add((ShortVector) f1.reinterpretShape(ShortVector.SPECIES_64, 1));
                f2 = ((ShortVector) f2.reinterpretShape(ShortVector.SPECIES_64, 0)).add((ShortVector) f2.reinterpretShape(ShortVector.SPECIES_64, 1));
                f3 = ((ShortVector) f3.reinterpretShape(ShortVector.SPECIES_64, 0)).add((ShortVector) f3.reinterpretShape(ShortVector.SPECIES_64, 1));
            }
            acc0 = ((DoubleVector) f0.convertShape(VectorOperators.S2D, D, 0)).fma(DoubleVector.broadcast(D, dw * xd[x0 * blocks + b]), acc0);
            acc1 = ((DoubleVector) f1.convertShape(VectorOperators.S2D, D, 0)).fma(DoubleVector.broadcast(D, dw * xd[x1 * blocks + b]), acc1);
            acc2 = ((DoubleVector) f2.convertShape(VectorOperators.S2D, D, 0)).fma(DoubleVector.broadcast(D, dw * xd[x2 * blocks + b]), acc2);
            acc3 = ((DoubleVector) f3.convertShape(VectorOperators.S2D, D, 0)).fma(DoubleVector.broadcast(D, dw * xd[x3 * blocks + b]), acc3);
        }
        // The lanes of each summed in the fixed order of dotQ4_0.
        if (D.length() == 8) {
            acc0 = ((DoubleVector) acc0.reinterpretShape(DoubleVector.SPECIES_256, 0)).add((DoubleVector) acc0.reinterpretShape(DoubleVector.SPECIES_256, 1));
            acc1 = ((DoubleVector) acc1.reinterpretShape(DoubleVector.SPECIES_256, 0)).add((DoubleVector) acc1.reinterpretShape(DoubleVector.SPECIES_256, 1));
            acc2 = ((DoubleVector) acc2.reinterpretShape(DoubleVector.SPECIES_256, 0)).add((DoubleVector) acc2.reinterpretShape(DoubleVector.SPECIES_256, 1));
            acc3 = ((DoubleVector) acc3.reinterpretShape(DoubleVector.SPECIES_256, 0)).add((DoubleVector) acc3.reinterpretShape(DoubleVector.SPECIES_256, 1));
        }
        DoubleVector s0 = ((DoubleVector) acc0.reinterpretShape(DoubleVector.SPECIES_128, 0)).add((DoubleVector) acc0.reinterpretShape(DoubleVector.SPECIES_128, 1));
        DoubleVector s1 = ((DoubleVector) acc1.reinterpretShape(DoubleVector.SPECIES_128, 0)).add((DoubleVector) acc1.reinterpretShape(DoubleVector.SPECIES_128, 1));
        DoubleVector s2 = ((DoubleVector) acc2.reinterpretShape(DoubleVector.SPECIES_128, 0)).add((DoubleVector) acc2.reinterpretShape(DoubleVector.SPECIES_128, 1));
        DoubleVector s3 = ((DoubleVector) acc3.reinterpretShape(DoubleVector.SPECIES_128, 0)).add((DoubleVector) acc3.reinterpretShape(DoubleVector.SPECIES_128, 1));
        result[0] = (float) (s0.lane(0) + s0.lane(1));
        result[1] = (float) (s1.lane(0) + s1.lane(1));
        result[2] = (float) (s2.lane(0) + s2.lane(1));
        result[3] = (float) (s3.lane(0) + s3.lane(1));
    }

    /** Q8_0 weights (34-byte blocks: fp16 d, 32 signed quants) · Q8_0 activations, as {@link #dotQ4_0}. */
    static float dotQ8_0(MemorySegment w, long offset, short[] xq, int xOff, float[] xd, int xdOff, int blocks) {
        DoubleVector acc = DoubleVector.zero(D);
        for (int b = 0; b < blocks; b++) {
            long wb = offset + (long) b * Q8_0_BLOCK_BYTES;
            int xb = xOff + b * QK;
            ShortVector first = (ShortVector) ByteVector.fromMemorySegment(B, w, wb + 2, LE).convertShape(VectorOperators.B2S, S, 0);
            ShortVector second = (ShortVector) ByteVector.fromMemorySegment(B, w, wb + 2 + QK / 2, LE).convertShape(VectorOperators.B2S, S, 0);
            ShortVector block = first.mul(ShortVector.fromArray(S, xq, xb)).add(second.mul(ShortVector.fromArray(S, xq, xb + QK / 2)));
            // Products reach 127·127, so two fill a 16-bit lane: widen to 32 bits before folding.
            IntVector folded = ((IntVector) ((ShortVector) block.reinterpretShape(ShortVector.SPECIES_128, 0))
                    .convertShape(VectorOperators.S2I, IntVector.SPECIES_256, 0))
                    .add((IntVector) ((ShortVector) block.reinterpretShape(ShortVector.SPECIES_128, 1))
                            .convertShape(VectorOperators.S2I, IntVector.SPECIES_256, 0));
            if (D.length() == 4) {
                folded = ((IntVector) folded.reinterpretShape(IntVector.SPECIES_128, 0))
                        .add((IntVector) folded.reinterpretShape(IntVector.SPECIES_128, 1));
            }
            float d = Float.float16ToFloat(w.get(HALF, wb)) * xd[xdOff + b];
            acc = ((DoubleVector) folded.convertShape(VectorOperators.I2D, D, 0)).fma(DoubleVector.broadcast(D, d), acc);
        }
        // The lanes summed in a fixed order (halves added lane-wise): reduceLanes may add in another order
        // once compiled than before, and a result must not depend on how warm the JVM is.
        if (D.length() == 8) {
            acc = ((DoubleVector) acc.reinterpretShape(DoubleVector.SPECIES_256, 0)).add((DoubleVector) acc.reinterpretShape(DoubleVector.SPECIES_256, 1));
        }
        DoubleVector pair = ((DoubleVector) acc.reinterpretShape(DoubleVector.SPECIES_128, 0)).add((DoubleVector) acc.reinterpretShape(DoubleVector.SPECIES_128, 1));
        return (float) (pair.lane(0) + pair.lane(1));
    }

    /** F32 weights · F32 activations: each product exact in double, summed in double lanes; {@code n} any length. */
    static float dotF32(MemorySegment w, long offset, float[] x, int xOff, int n) {
        DoubleVector acc = DoubleVector.zero(D);
        int step = D.length();
        int i = 0;
        for (; i + step <= n; i += step) {
            DoubleVector wv = (DoubleVector) FloatVector.fromMemorySegment(HALF_D, w, offset + 4L * i, LE).convertShape(VectorOperators.F2D, D, 0);
            DoubleVector xv = (DoubleVector) FloatVector.fromArray(HALF_D, x, xOff + i).convertShape(VectorOperators.F2D, D, 0);
            acc = wv.fma(xv, acc);
        }
        // The lanes summed in a fixed order (halves added lane-wise): reduceLanes may add in another order
        // once compiled than before, and a result must not depend on how warm the JVM is.
        if (D.length() == 8) {
            acc = ((DoubleVector) acc.reinterpretShape(DoubleVector.SPECIES_256, 0)).add((DoubleVector) acc.reinterpretShape(DoubleVector.SPECIES_256, 1));
        }
        DoubleVector pair = ((DoubleVector) acc.reinterpretShape(DoubleVector.SPECIES_128, 0)).add((DoubleVector) acc.reinterpretShape(DoubleVector.SPECIES_128, 1));
        double sum = pair.lane(0) + pair.lane(1);
        for (; i < n; i++) {
            sum += (double) w.get(FLOAT, offset + 4L * i) * x[xOff + i];
        }
        return (float) sum;
    }
}
