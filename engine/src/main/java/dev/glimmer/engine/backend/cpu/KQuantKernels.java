package dev.glimmer.engine.backend.cpu;

import dev.glimmer.engine.tensor.Q4_K;
import dev.glimmer.engine.tensor.Q5_K;
import dev.glimmer.engine.tensor.Q6_K;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorSpecies;

/**
 * Dot products of K-quant weight rows (Q4_K, Q5_K, Q6_K: super-blocks of 256 values), read in place
 * from the mapped file, with Q8_K activations, with the Vector API.
 *
 * <p>Only the integer part is vectorized: per super-block, the quants are unpacked into 16-bit lanes
 * (products |q·x| ≤ 4064 fit), adjacent products added into 32-bit lanes, multiplied there by their
 * sub-block's scale and summed (integers: exact in any order). The super-block's exact sums are then
 * scaled and added in double exactly as the tensor package's reference dots do, so the results equal
 * those bit for bit. The vectors are the widest available (16 or 32 shorts; a sub-block of 32 values
 * takes one or two steps). As in {@link Kernels}, the vector code is written out flat in each kernel; the
 * scalar unpacking of a block's scales is {@link Q4_K}'s own (a plain call outside the vector chains).
 *
 * <p>Activation row layout (see {@link ActivationRows}): {@code xq[xOff ..]} the quants as shorts,
 * {@code xd[xOff/256 ..]} the super-block scales, {@code xSums[xOff/16 ..]} the sums of each 16 quants.
 */
final class KQuantKernels {
    private static final VectorSpecies<Short> SP = ShortVector.SPECIES_PREFERRED;
    /** As many bytes as {@link #SP} has lanes: one load widens into one vector of shorts. */
    private static final VectorSpecies<Byte> BP =
            ByteVector.SPECIES_PREFERRED.withShape(VectorShape.forBitSize(SP.length() * 8));

    private static final VectorSpecies<Integer> IP = IntVector.SPECIES_PREFERRED.withShape(SP.vectorShape());
    /** The 32-bit lanes holding products of values 16..31 of a step (none when a step is 16 values). */
    private static final VectorMask<Integer> SECOND_SIXTEEN =
            IntVector.zero(IP).addIndex(1).compare(VectorOperators.GE, 8);

    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    private static final ValueLayout.OfShort HALF = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(LE);

    static final int QK_K = Q4_K.BLOCK_SIZE;

    private KQuantKernels() {}

    /**
     * Q4_K weights (fp16 d, fp16 dmin, 12 bytes of packed 6-bit scales and minimums, 128 bytes of nibbles:
     * bytes 32p.. hold sub-block 2p in their low and 2p+1 in their high nibbles) · Q8_K activations.
     */
    static float dotQ4_K(
            MemorySegment w, long offset, short[] xq, float[] xd, short[] xSums, int xOff, int superBlocks) {
        int step = SP.length();
        double sum = 0;
        for (int sb = 0; sb < superBlocks; sb++) {
            long wb = offset + (long) sb * Q4_K.BLOCK_BYTES;
            int xb = xOff + sb * QK_K;
            int sg = xOff / 16 + sb * 16;
            IntVector acc = IntVector.zero(IP);
            int summ = 0;
            for (int p = 0; p < 4; p++) {
                // The 6-bit scales and minimums of sub-blocks 2p (lo) and 2p+1 (hi).
                int s0 = 2 * p;
                int s1 = 2 * p + 1;
                int scLo = Q4_K.scale(w, wb + Q4_K.SCALES, s0);
                int scHi = Q4_K.scale(w, wb + Q4_K.SCALES, s1);
                summ += Q4_K.min(w, wb + Q4_K.SCALES, s0) * (xSums[sg + 2 * s0] + xSums[sg + 2 * s0 + 1])
                        + Q4_K.min(w, wb + Q4_K.SCALES, s1) * (xSums[sg + 2 * s1] + xSums[sg + 2 * s1 + 1]);
                for (int c = 0; c < 32; c += step) {
                    ShortVector q = (ShortVector) ByteVector.fromMemorySegment(BP, w, wb + 16 + 32 * p + c, LE)
                            .convertShape(VectorOperators.ZERO_EXTEND_B2S, SP, 0);
                    IntVector lo = q.and((short) 0xF)
                            .mul(ShortVector.fromArray(SP, xq, xb + 64 * p + c))
                            .reinterpretAsInts();
                    IntVector hi = q.lanewise(VectorOperators.LSHR, 4)
                            .mul(ShortVector.fromArray(SP, xq, xb + 64 * p + 32 + c))
                            .reinterpretAsInts();
                    acc = acc.add(lo.lanewise(VectorOperators.ASHR, 16)
                                    .add(lo.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16))
                                    .mul(scLo))
                            .add(hi.lanewise(VectorOperators.ASHR, 16)
                                    .add(hi.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16))
                                    .mul(scHi));
                }
            }
            int sumi = acc.reduceLanes(VectorOperators.ADD);
            float d = xd[xOff / QK_K + sb] * Float.float16ToFloat(w.get(HALF, wb));
            float dmin = -xd[xOff / QK_K + sb] * Float.float16ToFloat(w.get(HALF, wb + Q4_K.DMIN));
            sum += (double) d * sumi + (double) dmin * summ;
        }
        return (float) sum;
    }

    /**
     * Q5_K weights (as Q4_K, with 32 bytes of fifth bits before the nibbles: bit s of byte l belongs to
     * value l of sub-block s) · Q8_K activations.
     */
    // dotQ4_K's frame again (scales, minimums, the super-block's scaling): the vector code stays flat in each
    // kernel, see the class comment.
    static float dotQ5_K(
            MemorySegment w, long offset, short[] xq, float[] xd, short[] xSums, int xOff, int superBlocks) {
        int step = SP.length();
        double sum = 0;
        for (int sb = 0; sb < superBlocks; sb++) {
            long wb = offset + (long) sb * Q5_K.BLOCK_BYTES;
            int xb = xOff + sb * QK_K;
            int sg = xOff / 16 + sb * 16;
            IntVector acc = IntVector.zero(IP);
            int summ = 0;
            for (int p = 0; p < 4; p++) {
                // Scales and minimums packed as Q4_K's.
                int s0 = 2 * p;
                int s1 = 2 * p + 1;
                int scLo = Q4_K.scale(w, wb + Q4_K.SCALES, s0);
                int scHi = Q4_K.scale(w, wb + Q4_K.SCALES, s1);
                summ += Q4_K.min(w, wb + Q4_K.SCALES, s0) * (xSums[sg + 2 * s0] + xSums[sg + 2 * s0 + 1])
                        + Q4_K.min(w, wb + Q4_K.SCALES, s1) * (xSums[sg + 2 * s1] + xSums[sg + 2 * s1 + 1]);
                for (int c = 0; c < 32; c += step) {
                    ShortVector q = (ShortVector) ByteVector.fromMemorySegment(BP, w, wb + 48 + 32 * p + c, LE)
                            .convertShape(VectorOperators.ZERO_EXTEND_B2S, SP, 0);
                    ShortVector high = (ShortVector) ByteVector.fromMemorySegment(BP, w, wb + 16 + c, LE)
                            .convertShape(VectorOperators.ZERO_EXTEND_B2S, SP, 0);
                    ShortVector q0 = q.and((short) 0xF)
                            .or(high.lanewise(VectorOperators.LSHR, s0)
                                    .and((short) 1)
                                    .lanewise(VectorOperators.LSHL, 4));
                    ShortVector q1 = q.lanewise(VectorOperators.LSHR, 4)
                            .or(high.lanewise(VectorOperators.LSHR, s1)
                                    .and((short) 1)
                                    .lanewise(VectorOperators.LSHL, 4));
                    IntVector lo = q0.mul(ShortVector.fromArray(SP, xq, xb + 64 * p + c))
                            .reinterpretAsInts();
                    IntVector hi = q1.mul(ShortVector.fromArray(SP, xq, xb + 64 * p + 32 + c))
                            .reinterpretAsInts();
                    acc = acc.add(lo.lanewise(VectorOperators.ASHR, 16)
                                    .add(lo.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16))
                                    .mul(scLo))
                            .add(hi.lanewise(VectorOperators.ASHR, 16)
                                    .add(hi.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16))
                                    .mul(scHi));
                }
            }
            int sumi = acc.reduceLanes(VectorOperators.ADD);
            float d = xd[xOff / QK_K + sb] * Float.float16ToFloat(w.get(HALF, wb));
            float dmin = -xd[xOff / QK_K + sb] * Float.float16ToFloat(w.get(HALF, wb + Q4_K.DMIN));
            sum += (double) d * sumi + (double) dmin * summ;
        }
        return (float) sum;
    }

    /**
     * Q6_K weights (128 bytes of low nibbles, 64 bytes of high bit pairs, 16 signed 8-bit scales of 16
     * values each, fp16 d last) · Q8_K activations. In each half of 128 values, value 32k+l takes its low
     * bits from byte l (k = 0, 2) or l+32 (k = 1, 3) of the half's 64 low bytes, low nibble for k &lt; 2,
     * and bits 2k, 2k+1 of byte l of the half's 32 high bytes; the quant is that 6-bit number minus 32.
     */
    static float dotQ6_K(MemorySegment w, long offset, short[] xq, float[] xd, int xOff, int superBlocks) {
        int step = SP.length();
        double sum = 0;
        for (int sb = 0; sb < superBlocks; sb++) {
            long wb = offset + (long) sb * Q6_K.BLOCK_BYTES;
            int xb = xOff + sb * QK_K;
            IntVector acc = IntVector.zero(IP);
            for (int h = 0; h < 2; h++) {
                for (int c = 0; c < 32; c += step) {
                    ShortVector a = (ShortVector) ByteVector.fromMemorySegment(BP, w, wb + 64 * h + c, LE)
                            .convertShape(VectorOperators.ZERO_EXTEND_B2S, SP, 0);
                    ShortVector b = (ShortVector) ByteVector.fromMemorySegment(BP, w, wb + 64 * h + 32 + c, LE)
                            .convertShape(VectorOperators.ZERO_EXTEND_B2S, SP, 0);
                    ShortVector high = (ShortVector) ByteVector.fromMemorySegment(BP, w, wb + 128 + 32 * h + c, LE)
                            .convertShape(VectorOperators.ZERO_EXTEND_B2S, SP, 0);
                    ShortVector q0 = a.and((short) 0xF)
                            .or(high.and((short) 3).lanewise(VectorOperators.LSHL, 4))
                            .sub((short) 32);
                    ShortVector q1 = b.and((short) 0xF)
                            .or(high.lanewise(VectorOperators.LSHR, 2)
                                    .and((short) 3)
                                    .lanewise(VectorOperators.LSHL, 4))
                            .sub((short) 32);
                    ShortVector q2 = a.lanewise(VectorOperators.LSHR, 4)
                            .or(high.lanewise(VectorOperators.LSHR, 4)
                                    .and((short) 3)
                                    .lanewise(VectorOperators.LSHL, 4))
                            .sub((short) 32);
                    ShortVector q3 = b.lanewise(VectorOperators.LSHR, 4)
                            .or(high.lanewise(VectorOperators.LSHR, 6).lanewise(VectorOperators.LSHL, 4))
                            .sub((short) 32);
                    int v = 128 * h + c;
                    IntVector p0 = q0.mul(ShortVector.fromArray(SP, xq, xb + v)).reinterpretAsInts();
                    IntVector p1 =
                            q1.mul(ShortVector.fromArray(SP, xq, xb + v + 32)).reinterpretAsInts();
                    IntVector p2 =
                            q2.mul(ShortVector.fromArray(SP, xq, xb + v + 64)).reinterpretAsInts();
                    IntVector p3 =
                            q3.mul(ShortVector.fromArray(SP, xq, xb + v + 96)).reinterpretAsInts();
                    // Sub-block v/16 for the first 16 values of the step, the next one for the second 16.
                    long sc = wb + 192 + v / 16;
                    IntVector sc0 = IntVector.broadcast(IP, w.get(ValueLayout.JAVA_BYTE, sc))
                            .blend(w.get(ValueLayout.JAVA_BYTE, sc + 1), SECOND_SIXTEEN);
                    IntVector sc1 = IntVector.broadcast(IP, w.get(ValueLayout.JAVA_BYTE, sc + 2))
                            .blend(w.get(ValueLayout.JAVA_BYTE, sc + 3), SECOND_SIXTEEN);
                    IntVector sc2 = IntVector.broadcast(IP, w.get(ValueLayout.JAVA_BYTE, sc + 4))
                            .blend(w.get(ValueLayout.JAVA_BYTE, sc + 5), SECOND_SIXTEEN);
                    IntVector sc3 = IntVector.broadcast(IP, w.get(ValueLayout.JAVA_BYTE, sc + 6))
                            .blend(w.get(ValueLayout.JAVA_BYTE, sc + 7), SECOND_SIXTEEN);
                    acc = acc.add(p0.lanewise(VectorOperators.ASHR, 16)
                                    .add(p0.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16))
                                    .mul(sc0))
                            .add(p1.lanewise(VectorOperators.ASHR, 16)
                                    .add(p1.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16))
                                    .mul(sc1))
                            .add(p2.lanewise(VectorOperators.ASHR, 16)
                                    .add(p2.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16))
                                    .mul(sc2))
                            .add(p3.lanewise(VectorOperators.ASHR, 16)
                                    .add(p3.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16))
                                    .mul(sc3));
                }
            }
            int sumi = acc.reduceLanes(VectorOperators.ADD);
            float d = xd[xOff / QK_K + sb] * Float.float16ToFloat(w.get(HALF, wb + Q6_K.D));
            sum += (double) d * sumi;
        }
        return (float) sum;
    }
}
