package dev.glimmer.engine.backend.cpu;

import dev.glimmer.engine.tensor.Q4_K;
import dev.glimmer.engine.tensor.Q5_K;
import dev.glimmer.engine.tensor.Q6_K;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorShuffle;
import jdk.incubator.vector.VectorSpecies;

/**
 * Dot products of K-quant weight rows (Q4_K, Q5_K, Q6_K: super-blocks of 256 values), read in place
 * from the mapped file, with Q8_K activations, with the Vector API.
 *
 * <p>Only the integer part is vectorized: per super-block, the quants are unpacked into 16-bit lanes
 * (products |q·x| ≤ 8001 fit), adjacent products added into 32-bit lanes, multiplied there by their
 * sub-block's scale and summed (integers: exact in any order). The float part is then exactly that of
 * the tensor package's reference dots, which follow llama.cpp's x86 kernels: for Q4_K the super-block's
 * two sums fused multiply-added into two float accumulators; for Q5_K and Q6_K the integer sums kept in 8
 * lanes (the lanes of llama.cpp's AVX2 kernels), each fused multiply-added into a float lane, the lanes
 * summed in llama.cpp's order at the end. So the results equal the reference's bit for bit. The Q4_K
 * kernel's vectors are the widest available (16 or 32 shorts; a sub-block of 32 values takes one or two
 * steps); Q5_K and Q6_K take 16 values per step, whose 8 int lanes are the reference's lanes. As in
 * {@link Kernels}, the vector code is written out flat in each kernel; the scalar unpacking of a block's
 * scales is {@link Q4_K}'s own (a plain call outside the vector chains).
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

    /**
     * The 256-bit shapes of the Q5_K and Q6_K kernels: 16 values per step (16 bytes widened to 16 shorts), whose
     * products' pairs fill 8 int lanes, as many as the float lanes the reference dots keep.
     */
    private static final VectorSpecies<Short> S16 = ShortVector.SPECIES_256;

    private static final VectorSpecies<Byte> B16 = ByteVector.SPECIES_128;
    private static final VectorSpecies<Integer> I8 = IntVector.SPECIES_256;
    private static final VectorSpecies<Float> F8 = FloatVector.SPECIES_256;
    /** 8 of a super-block's 16-value sums, 8 of its Q6_K scales: widened to the 8 int lanes. */
    private static final VectorSpecies<Short> S8 = ShortVector.SPECIES_128;

    private static final VectorSpecies<Byte> B8 = ByteVector.SPECIES_64;
    /** Swaps lanes 2p and 2p+1: a vector plus itself so rearranged holds each lane pair's sum in both lanes. */
    private static final VectorShuffle<Integer> PAIR_SWAP = VectorShuffle.fromValues(I8, 1, 0, 3, 2, 5, 4, 7, 6);

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
        float sum = 0f;
        float sumMin = 0f;
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
            float dx = xd[xOff / QK_K + sb];
            sum = Math.fma((float) sumi, Float.float16ToFloat(w.get(HALF, wb)) * dx, sum);
            sumMin = Math.fma((float) summ, Float.float16ToFloat(w.get(HALF, wb + Q4_K.DMIN)) * dx, sumMin);
        }
        return sum - sumMin;
    }

    /**
     * Q5_K weights (as Q4_K, with 32 bytes of fifth bits before the nibbles: bit s of byte l belongs to
     * value l of sub-block s) · Q8_K activations. The integer sums are kept per lane as {@link Q5_K}'s
     * reference dot keeps them: lane p of values 4p..4p+3 of every sub-block. In 256-bit steps of 16 values
     * (the first or second half of a sub-block), the 16-bit products' pairs are added into 8 32-bit lanes, so
     * that lanes 2p and 2p+1 of the first halves' accumulator ({@code lo}) hold the reference's lane p &lt; 4,
     * those of the second halves' ({@code hi}) lane p+4. Per super-block each accumulator's lane pairs are
     * added (lanes 2p and 2p+1 then both hold the sum), converted to float and fused multiply-added into float
     * lanes; the reference's lanes i and i+4 are then lanes 2i of {@code accLo} and {@code accHi}.
     */
    // dotQ4_K's frame again (scales, minimums), then the lane scheme shared with dotQ6_K: the vector code stays
    // flat in each kernel, see the class comment.
    static float dotQ5_K(
            MemorySegment w, long offset, short[] xq, float[] xd, short[] xSums, int xOff, int superBlocks) {
        FloatVector accLo = FloatVector.zero(F8);
        FloatVector accHi = FloatVector.zero(F8);
        float mins = 0f;
        for (int sb = 0; sb < superBlocks; sb++) {
            long wb = offset + (long) sb * Q5_K.BLOCK_BYTES;
            int xb = xOff + sb * QK_K;
            int sg = xOff / 16 + sb * 16;
            IntVector lo = IntVector.zero(I8);
            IntVector hi = IntVector.zero(I8);
            int summ = 0;
            for (int p = 0; p < 4; p++) {
                // Scales and minimums packed as Q4_K's.
                int s0 = 2 * p;
                int s1 = 2 * p + 1;
                int scLo = Q4_K.scale(w, wb + Q4_K.SCALES, s0);
                int scHi = Q4_K.scale(w, wb + Q4_K.SCALES, s1);
                summ += Q4_K.min(w, wb + Q4_K.SCALES, s0) * (xSums[sg + 2 * s0] + xSums[sg + 2 * s0 + 1])
                        + Q4_K.min(w, wb + Q4_K.SCALES, s1) * (xSums[sg + 2 * s1] + xSums[sg + 2 * s1 + 1]);
                for (int c = 0; c < 32; c += 16) {
                    ShortVector q = (ShortVector) ByteVector.fromMemorySegment(B16, w, wb + 48 + 32 * p + c, LE)
                            .convertShape(VectorOperators.ZERO_EXTEND_B2S, S16, 0);
                    ShortVector high = (ShortVector) ByteVector.fromMemorySegment(B16, w, wb + 16 + c, LE)
                            .convertShape(VectorOperators.ZERO_EXTEND_B2S, S16, 0);
                    ShortVector q0 = q.and((short) 0xF)
                            .or(high.lanewise(VectorOperators.LSHR, s0)
                                    .and((short) 1)
                                    .lanewise(VectorOperators.LSHL, 4));
                    ShortVector q1 = q.lanewise(VectorOperators.LSHR, 4)
                            .or(high.lanewise(VectorOperators.LSHR, s1)
                                    .and((short) 1)
                                    .lanewise(VectorOperators.LSHL, 4));
                    IntVector p0 = q0.mul(ShortVector.fromArray(S16, xq, xb + 64 * p + c))
                            .reinterpretAsInts();
                    IntVector p1 = q1.mul(ShortVector.fromArray(S16, xq, xb + 64 * p + 32 + c))
                            .reinterpretAsInts();
                    IntVector sums = p0.lanewise(VectorOperators.ASHR, 16)
                            .add(p0.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16))
                            .mul(scLo)
                            .add(p1.lanewise(VectorOperators.ASHR, 16)
                                    .add(p1.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16))
                                    .mul(scHi));
                    if (c == 0) {
                        lo = lo.add(sums);
                    } else {
                        hi = hi.add(sums);
                    }
                }
            }
            float dx = xd[xOff / QK_K + sb];
            FloatVector d = FloatVector.broadcast(F8, dx * Float.float16ToFloat(w.get(HALF, wb)));
            accLo = ((FloatVector) lo.lanewise(VectorOperators.ADD, lo.rearrange(PAIR_SWAP))
                            .convertShape(VectorOperators.I2F, F8, 0))
                    .fma(d, accLo);
            accHi = ((FloatVector) hi.lanewise(VectorOperators.ADD, hi.rearrange(PAIR_SWAP))
                            .convertShape(VectorOperators.I2F, F8, 0))
                    .fma(d, accHi);
            mins = Math.fma(-dx * Float.float16ToFloat(w.get(HALF, wb + Q4_K.DMIN)), (float) summ, mins);
        }
        // The reference's lane sum: r_i = lane i + lane i+4 (lanes 2i here), then (r0 + r2) + (r1 + r3).
        FloatVector r = accLo.lanewise(VectorOperators.ADD, accHi);
        return (r.lane(0) + r.lane(4)) + (r.lane(2) + r.lane(6)) + mins;
    }

    /**
     * Q6_K weights (128 bytes of low nibbles, 64 bytes of high bit pairs, 16 signed 8-bit scales of 16
     * values each, fp16 d last) · Q8_K activations. In each half of 128 values, value 32k+l takes its low
     * bits from byte l (k = 0, 2) or l+32 (k = 1, 3) of the half's 64 low bytes, low nibble for k &lt; 2,
     * and bits 2k, 2k+1 of byte l of the half's 32 high bytes; the quant is that 6-bit number minus 32.
     * As {@link Q6_K}'s reference dot, the unsigned 6-bit numbers are multiplied and the offset applied per
     * lane through the activation's 16-value sums: 32·scale·Σx of sub-blocks 2p and 2p+1 subtracted from
     * lane p (here from lanes 2p and 2p+1 of the accumulator that holds it). Lanes as in {@link #dotQ5_K},
     * with runs of 32 values in place of sub-blocks.
     */
    static float dotQ6_K(
            MemorySegment w, long offset, short[] xq, float[] xd, short[] xSums, int xOff, int superBlocks) {
        FloatVector accLo = FloatVector.zero(F8);
        FloatVector accHi = FloatVector.zero(F8);
        for (int sb = 0; sb < superBlocks; sb++) {
            long wb = offset + (long) sb * Q6_K.BLOCK_BYTES;
            int xb = xOff + sb * QK_K;
            int sg = xOff / 16 + sb * 16;
            IntVector lo = IntVector.zero(I8);
            IntVector hi = IntVector.zero(I8);
            for (int h = 0; h < 2; h++) {
                for (int c = 0; c < 32; c += 16) {
                    ShortVector a = (ShortVector) ByteVector.fromMemorySegment(B16, w, wb + 64 * h + c, LE)
                            .convertShape(VectorOperators.ZERO_EXTEND_B2S, S16, 0);
                    ShortVector b = (ShortVector) ByteVector.fromMemorySegment(B16, w, wb + 64 * h + 32 + c, LE)
                            .convertShape(VectorOperators.ZERO_EXTEND_B2S, S16, 0);
                    ShortVector high = (ShortVector) ByteVector.fromMemorySegment(B16, w, wb + 128 + 32 * h + c, LE)
                            .convertShape(VectorOperators.ZERO_EXTEND_B2S, S16, 0);
                    ShortVector q0 = a.and((short) 0xF).or(high.and((short) 3).lanewise(VectorOperators.LSHL, 4));
                    ShortVector q1 = b.and((short) 0xF)
                            .or(high.lanewise(VectorOperators.LSHR, 2)
                                    .and((short) 3)
                                    .lanewise(VectorOperators.LSHL, 4));
                    ShortVector q2 = a.lanewise(VectorOperators.LSHR, 4)
                            .or(high.lanewise(VectorOperators.LSHR, 4)
                                    .and((short) 3)
                                    .lanewise(VectorOperators.LSHL, 4));
                    ShortVector q3 = b.lanewise(VectorOperators.LSHR, 4)
                            .or(high.lanewise(VectorOperators.LSHR, 6).lanewise(VectorOperators.LSHL, 4));
                    int v = 128 * h + c;
                    IntVector p0 =
                            q0.mul(ShortVector.fromArray(S16, xq, xb + v)).reinterpretAsInts();
                    IntVector p1 =
                            q1.mul(ShortVector.fromArray(S16, xq, xb + v + 32)).reinterpretAsInts();
                    IntVector p2 =
                            q2.mul(ShortVector.fromArray(S16, xq, xb + v + 64)).reinterpretAsInts();
                    IntVector p3 =
                            q3.mul(ShortVector.fromArray(S16, xq, xb + v + 96)).reinterpretAsInts();
                    // Run k's 16 values here are all of sub-block (v + 32k) / 16.
                    long sc = wb + 192 + v / 16;
                    IntVector sums = p0.lanewise(VectorOperators.ASHR, 16)
                            .add(p0.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16))
                            .mul(w.get(ValueLayout.JAVA_BYTE, sc))
                            .add(p1.lanewise(VectorOperators.ASHR, 16)
                                    .add(p1.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16))
                                    .mul(w.get(ValueLayout.JAVA_BYTE, sc + 2)))
                            .add(p2.lanewise(VectorOperators.ASHR, 16)
                                    .add(p2.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16))
                                    .mul(w.get(ValueLayout.JAVA_BYTE, sc + 4)))
                            .add(p3.lanewise(VectorOperators.ASHR, 16)
                                    .add(p3.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16))
                                    .mul(w.get(ValueLayout.JAVA_BYTE, sc + 6)));
                    if (c == 0) {
                        lo = lo.add(sums);
                    } else {
                        hi = hi.add(sums);
                    }
                }
            }
            // The offset: 32·scale·Σx of sub-block j from lane j of lo (j < 8) or lane j-8 of hi.
            lo = lo.sub(((IntVector) ShortVector.fromArray(S8, xSums, sg).convertShape(VectorOperators.S2I, I8, 0))
                    .mul((IntVector)
                            ByteVector.fromMemorySegment(B8, w, wb + 192, LE).convertShape(VectorOperators.B2I, I8, 0))
                    .lanewise(VectorOperators.LSHL, 5));
            hi = hi.sub(((IntVector) ShortVector.fromArray(S8, xSums, sg + 8).convertShape(VectorOperators.S2I, I8, 0))
                    .mul((IntVector)
                            ByteVector.fromMemorySegment(B8, w, wb + 200, LE).convertShape(VectorOperators.B2I, I8, 0))
                    .lanewise(VectorOperators.LSHL, 5));
            FloatVector d =
                    FloatVector.broadcast(F8, xd[xOff / QK_K + sb] * Float.float16ToFloat(w.get(HALF, wb + Q6_K.D)));
            accLo = ((FloatVector) lo.lanewise(VectorOperators.ADD, lo.rearrange(PAIR_SWAP))
                            .convertShape(VectorOperators.I2F, F8, 0))
                    .fma(d, accLo);
            accHi = ((FloatVector) hi.lanewise(VectorOperators.ADD, hi.rearrange(PAIR_SWAP))
                            .convertShape(VectorOperators.I2F, F8, 0))
                    .fma(d, accHi);
        }
        FloatVector r = accLo.lanewise(VectorOperators.ADD, accHi);
        return (r.lane(0) + r.lane(4)) + (r.lane(2) + r.lane(6));
    }
}
