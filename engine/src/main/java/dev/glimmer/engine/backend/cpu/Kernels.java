package dev.glimmer.engine.backend.cpu;

import dev.glimmer.engine.tensor.Q4_0;
import dev.glimmer.engine.tensor.Q5_0;
import dev.glimmer.engine.tensor.Q8_0;
import dev.glimmer.engine.tensor.QuantizedVector;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorShuffle;
import jdk.incubator.vector.VectorSpecies;

/**
 * Dot products of one weight row, read in place from the mapped file, with one activation row, with
 * the Vector API.
 *
 * <p>The numerics are those of the tensor package's reference dots, which the conformance tests hold
 * against llama.cpp: activations rounded to Q8_0 (kept here as 16-bit integers); within a block of 32
 * the weight and activation quants are multiplied and summed exactly in integer lanes (16-bit lanes hold
 * 2 products; Q4_0's, |q_w·q_x| ≤ 1016, are folded to 4 or 8 per lane there, Q8_0's, up to 127·127, are
 * widened to 32 bits first; the four-block Q4_0 kernels sum 8 products per 32-bit lane); each block's
 * lane sums are scaled by {@code fp16(d_w) * d_x} (a float, as ggml forms it) in double lanes, exact there, and the
 * lanes summed in a fixed order at the end. So the result differs from the reference's double sum only
 * by double rounding. Float accumulation was measured for the four-block Q4_0 kernel (its 16 lanes
 * converted to float and fma'd there): 20-30 % more GB/s on weights in the cache, 0-18 % on weights
 * streamed from memory (as decode reads them; two runs, single thread); but it decides a near-tie of
 * tiny-q4_0's chat case differently from llama.cpp (position 24; greedy decoding then leaves llama.cpp's
 * tokens after 14 of 32), where the double sums agree with llama.cpp at every position. The conformance
 * test tolerates that (the tie is explained), but the exact agreement is worth more. So double it stays.
 * Q5_0 is the exception: its reference adds in llama.cpp's float lanes, and {@link #dotQ5_0} with it.
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

    private static final VectorSpecies<Float> HALF_D =
            D.length() == 8 ? FloatVector.SPECIES_256 : FloatVector.SPECIES_128;
    private static final VectorSpecies<Byte> B = ByteVector.SPECIES_128;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    private static final ValueLayout.OfShort HALF = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(LE);
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(LE);
    /** Lane j: 1 &lt;&lt; j (16 lanes), to test bit j of a 16-bit field in lane j. */
    private static final ShortVector BIT_OF_LANE = ShortVector.broadcast(S, (short) 1)
            .lanewise(VectorOperators.LSHL, ShortVector.zero(S).addIndex(1));

    private static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(LE);
    /** Q5_0's 8 int lanes (pairs of 16-bit products) and the 8 float lanes it accumulates in. */
    private static final VectorSpecies<Float> F8 = FloatVector.SPECIES_256;
    /** Swaps lanes 2p and 2p+1: a vector plus itself so rearranged holds each lane pair's sum in both lanes. */
    private static final VectorShuffle<Integer> PAIR_SWAP =
            VectorShuffle.fromValues(IntVector.SPECIES_256, 1, 0, 3, 2, 5, 4, 7, 6);

    /**
     * Whether the four-block Q4_0 kernels take a group in one 512-bit vector (where the CPU runs 512-bit
     * vectors natively: AVX-512 and the like) or in two 256-bit halves (AVX2); both give the same bits.
     */
    private static final boolean WIDE = ShortVector.SPECIES_PREFERRED.length() >= 32;
    /** 32 shorts, 16 ints, 16 floats: the 512-bit vectors of the four-block Q4_0 kernels (null where they are not native). */
    private static final VectorSpecies<Short> S32 = WIDE ? ShortVector.SPECIES_512 : null;

    private static final VectorSpecies<Float> F16L = WIDE ? FloatVector.SPECIES_512 : null;
    /**
     * Gathers the 4 blocks' nibbles from two 64-byte loads at the first block and 8 bytes on (shorts
     * 0..31 and 4..35 of the 72 bytes): lane 8k+p is short 9k+1+p, the nibble bytes 2p, 2p+1 of block k.
     */
    private static final ShortVector NIBBLE_LANES = WIDE
            ? lanes(i -> {
                int source = 9 * (i / 8) + 1 + i % 8;
                return source < 32 ? source : 32 + source - 4;
            })
            : null;
    /** Puts block k's fp16 scale (short 9k) into both halves of 32-bit lanes 4k..4k+3. */
    private static final ShortVector SCALE_LANES = WIDE ? lanes(i -> 9 * (i / 8)) : null;
    /** The 256-bit half-group kernels: 32 bytes (two blocks' 16 nibble bytes), 4 doubles. */
    private static final VectorSpecies<Byte> B32 = ByteVector.SPECIES_256;

    private static final VectorSpecies<Double> D4 = DoubleVector.SPECIES_256;
    /** Bytes 16..31 of a half group: the second block's nibbles, from the second of two loads. */
    private static final VectorMask<Byte> SECOND_BLOCK = VectorMask.fromLong(B32, 0xFFFF0000L);

    static final int Q4_0_BLOCK_BYTES = Q4_0.BLOCK_BYTES;
    static final int Q8_0_BLOCK_BYTES = Q8_0.BLOCK_BYTES;
    static final int Q5_0_BLOCK_BYTES = Q5_0.BLOCK_BYTES;
    static final int QK = 32;

    private Kernels() {}

    private static ShortVector lanes(java.util.function.IntUnaryOperator index) {
        short[] lanes = new short[S32.length()];
        for (int i = 0; i < lanes.length; i++) {
            lanes[i] = (short) index.applyAsInt(i);
        }
        return ShortVector.fromArray(S32, lanes, 0);
    }

    /** How many of a Q4_0 row's {@code blocks} blocks {@link #dotQ4_0} takes four at a time (the rest one by one). */
    static int groupedBlocks(int blocks) {
        return blocks & ~3;
    }

    /**
     * Lays out a Q4_0 activation row (Q8_0 {@code quants} of {@code cols} values and block {@code scales})
     * for {@link #dotQ4_0}: {@code xq[xOff ..]}, {@code xBias[xOff/4 ..]}, {@code xd4[xOff/8 ..]},
     * {@code xd[xOff/32 ..]}. In each group of four blocks, the 128 quants are stored as 4 runs of 32
     * lanes, lane 8k+p of run g holding value 2p (g=0), 2p+16 (g=1), 2p+1 (g=2) or 2p+17 (g=3) of block
     * k: the value whose weight nibble the kernel finds in that lane. The lane's bias is 8 times the sum
     * of its 4 quants (Σ (q-8)·x = Σ q·x - 8·Σ x).
     */
    static void groupQ4_0Quants(
            QuantizedVector x, int cols, short[] xq, short[] xBias, float[] xd4, float[] xd, int xOff) {
        int blocks = cols / QK;
        int grouped = groupedBlocks(blocks);
        for (int b = 0; b < grouped; b += 4) {
            int base = b * QK;
            for (int i = 0; i < 32; i++) {
                int block = base + (i / 8) * QK;
                int p = i % 8;
                int bias = 0;
                for (int g = 0; g < 4; g++) {
                    int value = block + 2 * p + (g % 2) * 16 + g / 2;
                    xq[xOff + base + 32 * g + i] = x.quant(value);
                    bias += x.quant(value);
                }
                xBias[(xOff + base) / 4 + i] = (short) (8 * bias);
            }
            for (int k = 0; k < 4; k++) {
                for (int lane = 0; lane < 4; lane++) {
                    xd4[(xOff + base) / 8 + 4 * k + lane] = x.blockScale(b + k);
                }
            }
        }
        for (int i = grouped * QK; i < cols; i++) {
            xq[xOff + i] = x.quant(i);
        }
        for (int b = 0; b < blocks; b++) {
            xd[xOff / QK + b] = x.blockScale(b);
        }
    }

    /** The width of the vectors these kernels compute with here: the widest this CPU runs natively. */
    static int vectorBits() {
        return ShortVector.SPECIES_PREFERRED.vectorBitSize();
    }

    /** Whether these kernels can run here: 256-bit vectors at least (AVX2, AVX-512, SVE-256 and the like). */
    static boolean supported() {
        return D.length() == 4 || D.length() == 8;
    }

    /**
     * Q4_0 weights (18-byte blocks: fp16 d, 16 bytes of nibbles, value j the low nibble of byte j, value
     * j+16 its high nibble, each minus 8) · Q8_0 activations, over {@code blocks} blocks. The activation
     * row is in the layout {@link ActivationRows} gives Q4_0 activations: {@code xq} from {@code xOff} the
     * quants (the first {@link #groupedBlocks} blocks in groups of four, see {@link #groupQ4_0Quants}, the
     * rest in order), {@code xBias} from {@code xOff/4} the groups' lane biases, {@code xd4} from
     * {@code xOff/8} each block's scale 4 times, {@code xd} from {@code xOff/32} each block's scale.
     *
     * <p>With 512-bit vectors, four blocks per step: two loads span the 72 bytes of the four blocks, one
     * two-vector permute gathers their 64 nibble bytes, seen as 32 16-bit lanes (8 per block, each holding
     * 4 nibbles), and shifts and masks split them into 4 vectors of quants 0..15. Their products with the
     * matching activation quants (the grouped layout puts them in the same lanes) are summed per lane and
     * the lane's bias {@code 8·Σx} subtracted, which is the exact Σ (q-8)·x of 4 values; adjacent lanes
     * are added into 32-bit lanes (4 per block), converted to double and multiplied there by the block's
     * {@code fp16(d_w)·d_x}, whose 4 fp16 scales are widened to float in the vector lanes as well. Left
     * over blocks (fewer than 4) go one at a time: 16 products folded into 8 lanes (lanes i and i+8),
     * scaled into the same 8 double lanes.
     *
     * <p>The numbers do not depend on the vector width: these 8 double lanes (blocks 0 and 1 of each
     * group in one accumulator, 2 and 3 in another, then added) are what {@link #dotQ4_0Halves} keeps as
     * four 256-bit accumulators where 512-bit vectors are not native, and what the native kernels keep,
     * so every kernel gives the same bits on every machine.
     */
    static float dotQ4_0(
            MemorySegment w, long offset, short[] xq, short[] xBias, float[] xd4, float[] xd, int xOff, int blocks) {
        if (!WIDE) {
            return dotQ4_0Halves(w, offset, xq, xBias, xd, xOff, blocks);
        }
        int grouped = groupedBlocks(blocks);
        DoubleVector acc = DoubleVector.zero(D);
        if (grouped > 0) {
            DoubleVector acc1 = DoubleVector.zero(D);
            for (int b = 0; b < grouped; b += 4) {
                long wb = offset + (long) b * Q4_0_BLOCK_BYTES;
                int xb = xOff + b * QK;
                ShortVector first = ShortVector.fromMemorySegment(S32, w, wb, LE);
                ShortVector nibbles = NIBBLE_LANES.selectFrom(first, ShortVector.fromMemorySegment(S32, w, wb + 8, LE));
                ShortVector q0 = nibbles.and((short) 0xF);
                ShortVector q1 = nibbles.lanewise(VectorOperators.LSHR, 4).and((short) 0xF);
                ShortVector q2 = nibbles.lanewise(VectorOperators.LSHR, 8).and((short) 0xF);
                ShortVector q3 = nibbles.lanewise(VectorOperators.LSHR, 12);
                ShortVector sums = q0.mul(ShortVector.fromArray(S32, xq, xb))
                        .add(q1.mul(ShortVector.fromArray(S32, xq, xb + 32)))
                        .add(q2.mul(ShortVector.fromArray(S32, xq, xb + 64)))
                        .add(q3.mul(ShortVector.fromArray(S32, xq, xb + 96)))
                        .sub(ShortVector.fromArray(S32, xBias, xb / 4));
                IntVector pairs = sums.reinterpretAsInts();
                IntVector sumi = pairs.lanewise(VectorOperators.ASHR, 16)
                        .add(pairs.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16));
                // Each 32-bit lane gets its block's fp16 scale in both halves; widened to float exactly:
                // the magnitude bits moved into place and rescaled by 2^112 (exact for normal and subnormal
                // halves), infinities and NaNs given the float exponent, the sign put back.
                IntVector halves = SCALE_LANES.selectFrom(first).reinterpretAsInts();
                IntVector magnitude = halves.and(0x7FFF);
                IntVector bits = magnitude.lanewise(VectorOperators.LSHL, 13);
                FloatVector d = bits.reinterpretAsFloats()
                        .mul(0x1p112f)
                        .reinterpretAsInts()
                        .blend(bits.or(0x7F800000), magnitude.compare(VectorOperators.GE, 0x7C00))
                        .or(halves.and(0x80000000))
                        .reinterpretAsFloats()
                        .mul(FloatVector.fromArray(F16L, xd4, xb / 8));
                acc = ((DoubleVector) sumi.convertShape(VectorOperators.I2D, D, 0))
                        .fma((DoubleVector) d.convertShape(VectorOperators.F2D, D, 0), acc);
                acc1 = ((DoubleVector) sumi.rearrange(UpperHalves.I512).convertShape(VectorOperators.I2D, D, 0))
                        .fma(
                                (DoubleVector) d.rearrange(UpperHalves.F512).convertShape(VectorOperators.F2D, D, 0),
                                acc1);
            }
            acc = acc.add(acc1);
        }
        for (int b = grouped; b < blocks; b++) {
            long wb = offset + (long) b * Q4_0_BLOCK_BYTES;
            int xb = xOff + b * QK;
            ShortVector packed = (ShortVector)
                    ByteVector.fromMemorySegment(B, w, wb + 2, LE).convertShape(VectorOperators.ZERO_EXTEND_B2S, S, 0);
            ShortVector lo = packed.and((short) 0x0F).sub((short) 8);
            ShortVector hi = packed.lanewise(VectorOperators.LSHR, 4).sub((short) 8);
            ShortVector block =
                    lo.mul(ShortVector.fromArray(S, xq, xb)).add(hi.mul(ShortVector.fromArray(S, xq, xb + QK / 2)));
            ShortVector folded = ((ShortVector) block.reinterpretShape(ShortVector.SPECIES_128, 0))
                    .add((ShortVector) block.rearrange(UpperHalves.S256).reinterpretShape(ShortVector.SPECIES_128, 0));
            float d = Float.float16ToFloat(w.get(HALF, wb)) * xd[xOff / QK + b];
            acc = ((DoubleVector) folded.convertShape(VectorOperators.S2D, D, 0))
                    .fma(DoubleVector.broadcast(D, d), acc);
        }
        // The lanes summed in a fixed order (halves added lane-wise): reduceLanes may add in another order
        // once compiled than before, and a result must not depend on how warm the JVM is.
        acc = ((DoubleVector) acc.reinterpretShape(DoubleVector.SPECIES_256, 0))
                .add((DoubleVector) acc.rearrange(UpperHalves.D512).reinterpretShape(DoubleVector.SPECIES_256, 0));
        DoubleVector pair = ((DoubleVector) acc.reinterpretShape(DoubleVector.SPECIES_128, 0))
                .add((DoubleVector) acc.rearrange(UpperHalves.D256).reinterpretShape(DoubleVector.SPECIES_128, 0));
        return (float) (pair.lane(0) + pair.lane(1));
    }

    /**
     * {@link #dotQ4_0} with 256-bit vectors, bit for bit: a group of four blocks in two halves of two
     * blocks. A half's 32 nibble bytes come from two 32-byte loads (the first block's 16 at the start of
     * one, the second's at the end of the other, blended), seen as 16 lanes of 4 nibbles each, the
     * wide kernel's lanes 8k+p of blocks k = 0, 1; the activations and lane biases are that half of the
     * wide kernel's lanes. The four blocks' 4 double lanes each go to accumulators {@code a0..a3}, which
     * are the wide kernel's accumulators {@code acc} (lanes 0..3 and 4..7) and {@code acc1}; the blocks
     * after the groups are folded to 8 lanes as there and scaled into {@code low} and {@code high} (its
     * lanes 0..3 and 4..7), and the lanes summed in its order.
     */
    private static float dotQ4_0Halves(
            MemorySegment w, long offset, short[] xq, short[] xBias, float[] xd, int xOff, int blocks) {
        int grouped = groupedBlocks(blocks);
        DoubleVector a0 = DoubleVector.zero(D4);
        DoubleVector a1 = DoubleVector.zero(D4);
        DoubleVector a2 = DoubleVector.zero(D4);
        DoubleVector a3 = DoubleVector.zero(D4);
        for (int b = 0; b < grouped; b += 4) {
            long wb = offset + (long) b * Q4_0_BLOCK_BYTES;
            int xb = xOff + b * QK;
            // Blocks b and b+1: their nibbles at wb+2 and wb+20 (the second load's bytes 16..31).
            ShortVector n0 = ByteVector.fromMemorySegment(B32, w, wb + 2, LE)
                    .blend(ByteVector.fromMemorySegment(B32, w, wb + 4, LE), SECOND_BLOCK)
                    .reinterpretAsShorts();
            IntVector p0 = n0.and((short) 0xF)
                    .mul(ShortVector.fromArray(S, xq, xb))
                    .add(n0.lanewise(VectorOperators.LSHR, 4)
                            .and((short) 0xF)
                            .mul(ShortVector.fromArray(S, xq, xb + 32)))
                    .add(n0.lanewise(VectorOperators.LSHR, 8)
                            .and((short) 0xF)
                            .mul(ShortVector.fromArray(S, xq, xb + 64)))
                    .add(n0.lanewise(VectorOperators.LSHR, 12).mul(ShortVector.fromArray(S, xq, xb + 96)))
                    .sub(ShortVector.fromArray(S, xBias, xb / 4))
                    .reinterpretAsInts();
            IntVector s0 = p0.lanewise(VectorOperators.ASHR, 16)
                    .add(p0.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16));
            // Blocks b+2 and b+3: nibbles at wb+38 and wb+56.
            ShortVector n1 = ByteVector.fromMemorySegment(B32, w, wb + 38, LE)
                    .blend(ByteVector.fromMemorySegment(B32, w, wb + 40, LE), SECOND_BLOCK)
                    .reinterpretAsShorts();
            IntVector p1 = n1.and((short) 0xF)
                    .mul(ShortVector.fromArray(S, xq, xb + 16))
                    .add(n1.lanewise(VectorOperators.LSHR, 4)
                            .and((short) 0xF)
                            .mul(ShortVector.fromArray(S, xq, xb + 48)))
                    .add(n1.lanewise(VectorOperators.LSHR, 8)
                            .and((short) 0xF)
                            .mul(ShortVector.fromArray(S, xq, xb + 80)))
                    .add(n1.lanewise(VectorOperators.LSHR, 12).mul(ShortVector.fromArray(S, xq, xb + 112)))
                    .sub(ShortVector.fromArray(S, xBias, xb / 4 + 16))
                    .reinterpretAsInts();
            IntVector s1 = p1.lanewise(VectorOperators.ASHR, 16)
                    .add(p1.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16));
            int xs = xOff / QK + b;
            a0 = ((DoubleVector) s0.convertShape(VectorOperators.I2D, D4, 0))
                    .fma(DoubleVector.broadcast(D4, Float.float16ToFloat(w.get(HALF, wb)) * xd[xs]), a0);
            a1 = ((DoubleVector) s0.rearrange(UpperHalves.I256).convertShape(VectorOperators.I2D, D4, 0))
                    .fma(DoubleVector.broadcast(D4, Float.float16ToFloat(w.get(HALF, wb + 18)) * xd[xs + 1]), a1);
            a2 = ((DoubleVector) s1.convertShape(VectorOperators.I2D, D4, 0))
                    .fma(DoubleVector.broadcast(D4, Float.float16ToFloat(w.get(HALF, wb + 36)) * xd[xs + 2]), a2);
            a3 = ((DoubleVector) s1.rearrange(UpperHalves.I256).convertShape(VectorOperators.I2D, D4, 0))
                    .fma(DoubleVector.broadcast(D4, Float.float16ToFloat(w.get(HALF, wb + 54)) * xd[xs + 3]), a3);
        }
        DoubleVector low = a0.add(a2);
        DoubleVector high = a1.add(a3);
        for (int b = grouped; b < blocks; b++) {
            long wb = offset + (long) b * Q4_0_BLOCK_BYTES;
            int xb = xOff + b * QK;
            ShortVector packed = (ShortVector)
                    ByteVector.fromMemorySegment(B, w, wb + 2, LE).convertShape(VectorOperators.ZERO_EXTEND_B2S, S, 0);
            ShortVector lo = packed.and((short) 0x0F).sub((short) 8);
            ShortVector hi = packed.lanewise(VectorOperators.LSHR, 4).sub((short) 8);
            ShortVector block =
                    lo.mul(ShortVector.fromArray(S, xq, xb)).add(hi.mul(ShortVector.fromArray(S, xq, xb + QK / 2)));
            ShortVector folded = ((ShortVector) block.reinterpretShape(ShortVector.SPECIES_128, 0))
                    .add((ShortVector) block.rearrange(UpperHalves.S256).reinterpretShape(ShortVector.SPECIES_128, 0));
            DoubleVector d = DoubleVector.broadcast(D4, Float.float16ToFloat(w.get(HALF, wb)) * xd[xOff / QK + b]);
            low = ((DoubleVector) folded.convertShape(VectorOperators.S2D, D4, 0)).fma(d, low);
            high = ((DoubleVector) folded.rearrange(UpperHalves.S128).convertShape(VectorOperators.S2D, D4, 0))
                    .fma(d, high);
        }
        DoubleVector acc = low.add(high);
        DoubleVector pair = ((DoubleVector) acc.reinterpretShape(DoubleVector.SPECIES_128, 0))
                .add((DoubleVector) acc.rearrange(UpperHalves.D256).reinterpretShape(DoubleVector.SPECIES_128, 0));
        return (float) (pair.lane(0) + pair.lane(1));
    }

    /**
     * {@link #dotQ4_0} of one weight row with 2 activation rows at once (rows {@code x0, x1}, of
     * {@code 32·blocks} values each, in the layout of {@link #groupQ4_0Quants}), into
     * {@code result[at], result[at+1]}, for rows whose blocks all go four at a time
     * ({@code groupedBlocks(blocks) == blocks}): each weight block is unpacked once for the 2 tokens. The
     * numerics per token are those of {@link #dotQ4_0}, operation for operation. Two tokens, not four: a
     * method that big is more than C1 can compile (out of virtual registers), and the failed compile
     * leaves it running for minutes as the Vector API's very slow Java fallbacks before C2 takes it.
     */
    static void dotQ4_0x2Grouped(
            MemorySegment w,
            long offset,
            short[] xq,
            short[] xBias,
            float[] xd4,
            float[] xd,
            int blocks,
            int x0,
            int x1,
            float[] result,
            int at) {
        if (!WIDE) {
            dotQ4_0x2Halves(w, offset, xq, xBias, xd, blocks, x0, x1, result, at);
            return;
        }
        int cols = blocks * QK;
        int o0 = x0 * cols;
        int o1 = x1 * cols;
        DoubleVector acc0 = DoubleVector.zero(D);
        DoubleVector acc1 = DoubleVector.zero(D);
        DoubleVector high0 = DoubleVector.zero(D);
        DoubleVector high1 = DoubleVector.zero(D);
        for (int b = 0; b < blocks; b += 4) {
            long wb = offset + (long) b * Q4_0_BLOCK_BYTES;
            int xb = b * QK;
            ShortVector first = ShortVector.fromMemorySegment(S32, w, wb, LE);
            ShortVector nibbles = NIBBLE_LANES.selectFrom(first, ShortVector.fromMemorySegment(S32, w, wb + 8, LE));
            ShortVector q0 = nibbles.and((short) 0xF);
            ShortVector q1 = nibbles.lanewise(VectorOperators.LSHR, 4).and((short) 0xF);
            ShortVector q2 = nibbles.lanewise(VectorOperators.LSHR, 8).and((short) 0xF);
            ShortVector q3 = nibbles.lanewise(VectorOperators.LSHR, 12);
            IntVector halves = SCALE_LANES.selectFrom(first).reinterpretAsInts();
            IntVector magnitude = halves.and(0x7FFF);
            IntVector bits = magnitude.lanewise(VectorOperators.LSHL, 13);
            FloatVector dw = bits.reinterpretAsFloats()
                    .mul(0x1p112f)
                    .reinterpretAsInts()
                    .blend(bits.or(0x7F800000), magnitude.compare(VectorOperators.GE, 0x7C00))
                    .or(halves.and(0x80000000))
                    .reinterpretAsFloats();

            IntVector p0 = q0.mul(ShortVector.fromArray(S32, xq, o0 + xb))
                    .add(q1.mul(ShortVector.fromArray(S32, xq, o0 + xb + 32)))
                    .add(q2.mul(ShortVector.fromArray(S32, xq, o0 + xb + 64)))
                    .add(q3.mul(ShortVector.fromArray(S32, xq, o0 + xb + 96)))
                    .sub(ShortVector.fromArray(S32, xBias, (o0 + xb) / 4))
                    .reinterpretAsInts();
            IntVector p1 = q0.mul(ShortVector.fromArray(S32, xq, o1 + xb))
                    .add(q1.mul(ShortVector.fromArray(S32, xq, o1 + xb + 32)))
                    .add(q2.mul(ShortVector.fromArray(S32, xq, o1 + xb + 64)))
                    .add(q3.mul(ShortVector.fromArray(S32, xq, o1 + xb + 96)))
                    .sub(ShortVector.fromArray(S32, xBias, (o1 + xb) / 4))
                    .reinterpretAsInts();
            IntVector s0 = p0.lanewise(VectorOperators.ASHR, 16)
                    .add(p0.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16));
            IntVector s1 = p1.lanewise(VectorOperators.ASHR, 16)
                    .add(p1.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16));
            FloatVector d0 = dw.mul(FloatVector.fromArray(F16L, xd4, (o0 + xb) / 8));
            FloatVector d1 = dw.mul(FloatVector.fromArray(F16L, xd4, (o1 + xb) / 8));
            acc0 = ((DoubleVector) s0.convertShape(VectorOperators.I2D, D, 0))
                    .fma((DoubleVector) d0.convertShape(VectorOperators.F2D, D, 0), acc0);
            acc1 = ((DoubleVector) s1.convertShape(VectorOperators.I2D, D, 0))
                    .fma((DoubleVector) d1.convertShape(VectorOperators.F2D, D, 0), acc1);
            high0 = ((DoubleVector) s0.rearrange(UpperHalves.I512).convertShape(VectorOperators.I2D, D, 0))
                    .fma((DoubleVector) d0.rearrange(UpperHalves.F512).convertShape(VectorOperators.F2D, D, 0), high0);
            high1 = ((DoubleVector) s1.rearrange(UpperHalves.I512).convertShape(VectorOperators.I2D, D, 0))
                    .fma((DoubleVector) d1.rearrange(UpperHalves.F512).convertShape(VectorOperators.F2D, D, 0), high1);
        }
        acc0 = acc0.add(high0);
        acc1 = acc1.add(high1);
        // The lanes of each summed in the fixed order of dotQ4_0.
        acc0 = ((DoubleVector) acc0.reinterpretShape(DoubleVector.SPECIES_256, 0))
                .add((DoubleVector) acc0.rearrange(UpperHalves.D512).reinterpretShape(DoubleVector.SPECIES_256, 0));
        acc1 = ((DoubleVector) acc1.reinterpretShape(DoubleVector.SPECIES_256, 0))
                .add((DoubleVector) acc1.rearrange(UpperHalves.D512).reinterpretShape(DoubleVector.SPECIES_256, 0));
        DoubleVector s0 = ((DoubleVector) acc0.reinterpretShape(DoubleVector.SPECIES_128, 0))
                .add((DoubleVector) acc0.rearrange(UpperHalves.D256).reinterpretShape(DoubleVector.SPECIES_128, 0));
        DoubleVector s1 = ((DoubleVector) acc1.reinterpretShape(DoubleVector.SPECIES_128, 0))
                .add((DoubleVector) acc1.rearrange(UpperHalves.D256).reinterpretShape(DoubleVector.SPECIES_128, 0));
        result[at] = (float) (s0.lane(0) + s0.lane(1));
        result[at + 1] = (float) (s1.lane(0) + s1.lane(1));
    }

    /**
     * {@link #dotQ4_0x2Grouped} with 256-bit vectors, as {@link #dotQ4_0Halves} computes each token:
     * each half group of weights is unpacked once for the 2 tokens.
     */
    private static void dotQ4_0x2Halves(
            MemorySegment w,
            long offset,
            short[] xq,
            short[] xBias,
            float[] xd,
            int blocks,
            int x0,
            int x1,
            float[] result,
            int at) {
        int cols = blocks * QK;
        int o0 = x0 * cols;
        int o1 = x1 * cols;
        DoubleVector a0 = DoubleVector.zero(D4);
        DoubleVector a1 = DoubleVector.zero(D4);
        DoubleVector a2 = DoubleVector.zero(D4);
        DoubleVector a3 = DoubleVector.zero(D4);
        DoubleVector c0 = DoubleVector.zero(D4);
        DoubleVector c1 = DoubleVector.zero(D4);
        DoubleVector c2 = DoubleVector.zero(D4);
        DoubleVector c3 = DoubleVector.zero(D4);
        for (int b = 0; b < blocks; b += 4) {
            long wb = offset + (long) b * Q4_0_BLOCK_BYTES;
            int xb = b * QK;
            float w0 = Float.float16ToFloat(w.get(HALF, wb));
            float w1 = Float.float16ToFloat(w.get(HALF, wb + 18));
            float w2 = Float.float16ToFloat(w.get(HALF, wb + 36));
            float w3 = Float.float16ToFloat(w.get(HALF, wb + 54));
            ShortVector n = ByteVector.fromMemorySegment(B32, w, wb + 2, LE)
                    .blend(ByteVector.fromMemorySegment(B32, w, wb + 4, LE), SECOND_BLOCK)
                    .reinterpretAsShorts();
            ShortVector q0 = n.and((short) 0xF);
            ShortVector q1 = n.lanewise(VectorOperators.LSHR, 4).and((short) 0xF);
            ShortVector q2 = n.lanewise(VectorOperators.LSHR, 8).and((short) 0xF);
            ShortVector q3 = n.lanewise(VectorOperators.LSHR, 12);
            IntVector p = q0.mul(ShortVector.fromArray(S, xq, o0 + xb))
                    .add(q1.mul(ShortVector.fromArray(S, xq, o0 + xb + 32)))
                    .add(q2.mul(ShortVector.fromArray(S, xq, o0 + xb + 64)))
                    .add(q3.mul(ShortVector.fromArray(S, xq, o0 + xb + 96)))
                    .sub(ShortVector.fromArray(S, xBias, (o0 + xb) / 4))
                    .reinterpretAsInts();
            IntVector s = p.lanewise(VectorOperators.ASHR, 16)
                    .add(p.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16));
            a0 = ((DoubleVector) s.convertShape(VectorOperators.I2D, D4, 0))
                    .fma(DoubleVector.broadcast(D4, w0 * xd[(o0 + xb) / QK]), a0);
            a1 = ((DoubleVector) s.rearrange(UpperHalves.I256).convertShape(VectorOperators.I2D, D4, 0))
                    .fma(DoubleVector.broadcast(D4, w1 * xd[(o0 + xb) / QK + 1]), a1);
            p = q0.mul(ShortVector.fromArray(S, xq, o1 + xb))
                    .add(q1.mul(ShortVector.fromArray(S, xq, o1 + xb + 32)))
                    .add(q2.mul(ShortVector.fromArray(S, xq, o1 + xb + 64)))
                    .add(q3.mul(ShortVector.fromArray(S, xq, o1 + xb + 96)))
                    .sub(ShortVector.fromArray(S, xBias, (o1 + xb) / 4))
                    .reinterpretAsInts();
            s = p.lanewise(VectorOperators.ASHR, 16)
                    .add(p.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16));
            c0 = ((DoubleVector) s.convertShape(VectorOperators.I2D, D4, 0))
                    .fma(DoubleVector.broadcast(D4, w0 * xd[(o1 + xb) / QK]), c0);
            c1 = ((DoubleVector) s.rearrange(UpperHalves.I256).convertShape(VectorOperators.I2D, D4, 0))
                    .fma(DoubleVector.broadcast(D4, w1 * xd[(o1 + xb) / QK + 1]), c1);

            n = ByteVector.fromMemorySegment(B32, w, wb + 38, LE)
                    .blend(ByteVector.fromMemorySegment(B32, w, wb + 40, LE), SECOND_BLOCK)
                    .reinterpretAsShorts();
            q0 = n.and((short) 0xF);
            q1 = n.lanewise(VectorOperators.LSHR, 4).and((short) 0xF);
            q2 = n.lanewise(VectorOperators.LSHR, 8).and((short) 0xF);
            q3 = n.lanewise(VectorOperators.LSHR, 12);
            p = q0.mul(ShortVector.fromArray(S, xq, o0 + xb + 16))
                    .add(q1.mul(ShortVector.fromArray(S, xq, o0 + xb + 48)))
                    .add(q2.mul(ShortVector.fromArray(S, xq, o0 + xb + 80)))
                    .add(q3.mul(ShortVector.fromArray(S, xq, o0 + xb + 112)))
                    .sub(ShortVector.fromArray(S, xBias, (o0 + xb) / 4 + 16))
                    .reinterpretAsInts();
            s = p.lanewise(VectorOperators.ASHR, 16)
                    .add(p.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16));
            a2 = ((DoubleVector) s.convertShape(VectorOperators.I2D, D4, 0))
                    .fma(DoubleVector.broadcast(D4, w2 * xd[(o0 + xb) / QK + 2]), a2);
            a3 = ((DoubleVector) s.rearrange(UpperHalves.I256).convertShape(VectorOperators.I2D, D4, 0))
                    .fma(DoubleVector.broadcast(D4, w3 * xd[(o0 + xb) / QK + 3]), a3);
            p = q0.mul(ShortVector.fromArray(S, xq, o1 + xb + 16))
                    .add(q1.mul(ShortVector.fromArray(S, xq, o1 + xb + 48)))
                    .add(q2.mul(ShortVector.fromArray(S, xq, o1 + xb + 80)))
                    .add(q3.mul(ShortVector.fromArray(S, xq, o1 + xb + 112)))
                    .sub(ShortVector.fromArray(S, xBias, (o1 + xb) / 4 + 16))
                    .reinterpretAsInts();
            s = p.lanewise(VectorOperators.ASHR, 16)
                    .add(p.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16));
            c2 = ((DoubleVector) s.convertShape(VectorOperators.I2D, D4, 0))
                    .fma(DoubleVector.broadcast(D4, w2 * xd[(o1 + xb) / QK + 2]), c2);
            c3 = ((DoubleVector) s.rearrange(UpperHalves.I256).convertShape(VectorOperators.I2D, D4, 0))
                    .fma(DoubleVector.broadcast(D4, w3 * xd[(o1 + xb) / QK + 3]), c3);
        }
        // The lanes of each summed in the fixed order of dotQ4_0Halves.
        DoubleVector acc0 = a0.add(a2).add(a1.add(a3));
        DoubleVector acc1 = c0.add(c2).add(c1.add(c3));
        DoubleVector s0 = ((DoubleVector) acc0.reinterpretShape(DoubleVector.SPECIES_128, 0))
                .add((DoubleVector) acc0.rearrange(UpperHalves.D256).reinterpretShape(DoubleVector.SPECIES_128, 0));
        DoubleVector s1 = ((DoubleVector) acc1.reinterpretShape(DoubleVector.SPECIES_128, 0))
                .add((DoubleVector) acc1.rearrange(UpperHalves.D256).reinterpretShape(DoubleVector.SPECIES_128, 0));
        result[at] = (float) (s0.lane(0) + s0.lane(1));
        result[at + 1] = (float) (s1.lane(0) + s1.lane(1));
    }

    /**
     * Q5_0 weights (22-byte blocks: fp16 d, 32 fifth bits, 16 bytes of low nibbles laid out as Q4_0's,
     * each value minus 16) · Q8_0 activations in natural order ({@code xq[xOff ..]}, {@code xd[xOff/32 ..]}).
     * A fifth bit of 0 is the same as subtracting 16 from the nibble, of 1 as keeping it: 16 bits of the bit
     * field per half block, tested lane by lane. The float part is the tensor package's reference's (llama.cpp's
     * AVX2 lanes, see {@link dev.glimmer.engine.tensor.Q5_0}), so the result equals it bit for bit: the products
     * of values 0..15 and of 16..31 are each added in pairs into 8 int lanes, then lane pairs 2p, 2p+1 added
     * (both lanes then hold the sum of values 4p..4p+3, the reference's lane p, or p+4 for the second half),
     * converted to float and fused multiply-added into {@code accLo} and {@code accHi}, whose lanes 2i are the
     * reference's lanes i and i+4.
     */
    static float dotQ5_0(MemorySegment w, long offset, short[] xq, float[] xd, int xOff, int blocks) {
        FloatVector accLo = FloatVector.zero(F8);
        FloatVector accHi = FloatVector.zero(F8);
        for (int b = 0; b < blocks; b++) {
            long wb = offset + (long) b * Q5_0_BLOCK_BYTES;
            int xb = xOff + b * QK;
            int highBits = w.get(INT, wb + 2);
            ShortVector packed = (ShortVector)
                    ByteVector.fromMemorySegment(B, w, wb + 6, LE).convertShape(VectorOperators.ZERO_EXTEND_B2S, S, 0);
            ShortVector lo = packed.and((short) 0x0F);
            ShortVector hi = packed.lanewise(VectorOperators.LSHR, 4);
            lo = lo.sub((short) 16)
                    .blend(
                            lo,
                            ShortVector.broadcast(S, (short) highBits)
                                    .and(BIT_OF_LANE)
                                    .compare(VectorOperators.NE, 0));
            hi = hi.sub((short) 16)
                    .blend(
                            hi,
                            ShortVector.broadcast(S, (short) (highBits >>> 16))
                                    .and(BIT_OF_LANE)
                                    .compare(VectorOperators.NE, 0));
            IntVector pLo = lo.mul(ShortVector.fromArray(S, xq, xb)).reinterpretAsInts();
            IntVector pHi = hi.mul(ShortVector.fromArray(S, xq, xb + QK / 2)).reinterpretAsInts();
            IntVector sLo = pLo.lanewise(VectorOperators.ASHR, 16)
                    .add(pLo.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16));
            IntVector sHi = pHi.lanewise(VectorOperators.ASHR, 16)
                    .add(pHi.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16));
            FloatVector d = FloatVector.broadcast(F8, Float.float16ToFloat(w.get(HALF, wb)) * xd[xOff / QK + b]);
            accLo = ((FloatVector) sLo.lanewise(VectorOperators.ADD, sLo.rearrange(PAIR_SWAP))
                            .convertShape(VectorOperators.I2F, F8, 0))
                    .fma(d, accLo);
            accHi = ((FloatVector) sHi.lanewise(VectorOperators.ADD, sHi.rearrange(PAIR_SWAP))
                            .convertShape(VectorOperators.I2F, F8, 0))
                    .fma(d, accHi);
        }
        // The reference's lane sum: r_i = lane i + lane i+4 (lanes 2i here), then (r0 + r2) + (r1 + r3).
        FloatVector r = accLo.lanewise(VectorOperators.ADD, accHi);
        return (r.lane(0) + r.lane(4)) + (r.lane(2) + r.lane(6));
    }

    /** Q8_0 weights (34-byte blocks: fp16 d, 32 signed quants) · Q8_0 activations, as {@link #dotQ4_0}. */
    static float dotQ8_0(MemorySegment w, long offset, short[] xq, int xOff, float[] xd, int xdOff, int blocks) {
        DoubleVector acc = DoubleVector.zero(D);
        for (int b = 0; b < blocks; b++) {
            long wb = offset + (long) b * Q8_0_BLOCK_BYTES;
            int xb = xOff + b * QK;
            ShortVector first = (ShortVector)
                    ByteVector.fromMemorySegment(B, w, wb + 2, LE).convertShape(VectorOperators.B2S, S, 0);
            ShortVector second = (ShortVector)
                    ByteVector.fromMemorySegment(B, w, wb + 2 + QK / 2, LE).convertShape(VectorOperators.B2S, S, 0);
            ShortVector block = first.mul(ShortVector.fromArray(S, xq, xb))
                    .add(second.mul(ShortVector.fromArray(S, xq, xb + QK / 2)));
            // Products reach 127·127, so two fill a 16-bit lane: widen to 32 bits before folding.
            IntVector folded = ((IntVector) ((ShortVector) block.reinterpretShape(ShortVector.SPECIES_128, 0))
                            .convertShape(VectorOperators.S2I, IntVector.SPECIES_256, 0))
                    .add((IntVector) ((ShortVector)
                                    block.rearrange(UpperHalves.S256).reinterpretShape(ShortVector.SPECIES_128, 0))
                            .convertShape(VectorOperators.S2I, IntVector.SPECIES_256, 0));
            if (D.length() == 4) {
                folded = ((IntVector) folded.reinterpretShape(IntVector.SPECIES_128, 0))
                        .add((IntVector) folded.rearrange(UpperHalves.I256).reinterpretShape(IntVector.SPECIES_128, 0));
            }
            float d = Float.float16ToFloat(w.get(HALF, wb)) * xd[xdOff + b];
            acc = ((DoubleVector) folded.convertShape(VectorOperators.I2D, D, 0))
                    .fma(DoubleVector.broadcast(D, d), acc);
        }
        // The lanes summed in a fixed order (halves added lane-wise): reduceLanes may add in another order
        // once compiled than before, and a result must not depend on how warm the JVM is.
        if (D.length() == 8) {
            acc = ((DoubleVector) acc.reinterpretShape(DoubleVector.SPECIES_256, 0))
                    .add((DoubleVector) acc.rearrange(UpperHalves.D512).reinterpretShape(DoubleVector.SPECIES_256, 0));
        }
        DoubleVector pair = ((DoubleVector) acc.reinterpretShape(DoubleVector.SPECIES_128, 0))
                .add((DoubleVector) acc.rearrange(UpperHalves.D256).reinterpretShape(DoubleVector.SPECIES_128, 0));
        return (float) (pair.lane(0) + pair.lane(1));
    }

    /** Halves per step of {@link #dotF16}: as many as the double lanes. */
    private static final VectorSpecies<Short> HALVES_D =
            D.length() == 8 ? ShortVector.SPECIES_128 : ShortVector.SPECIES_64;

    private static final VectorSpecies<Integer> INTS_D =
            D.length() == 8 ? IntVector.SPECIES_256 : IntVector.SPECIES_128;

    /**
     * F16 weights · activations rounded to F16 and widened ({@code x}, exact floats), as the tensor package's
     * F16 dot: each product is exact in float (two 11-bit significands), and the products are summed in
     * double lanes, then the lanes in a fixed order; {@code n} any length. The halves are widened in
     * vector lanes: the magnitude's bits shifted into float position and scaled by 2^112 (exact for normal
     * and subnormal halves), infinities and NaNs given the float exponent directly, then the sign.
     */
    static float dotF16(MemorySegment w, long offset, float[] x, int xOff, int n) {
        DoubleVector acc = DoubleVector.zero(D);
        int step = D.length();
        int i = 0;
        for (; i + step <= n; i += step) {
            IntVector h = (IntVector) ShortVector.fromMemorySegment(HALVES_D, w, offset + 2L * i, LE)
                    .convertShape(VectorOperators.ZERO_EXTEND_S2I, INTS_D, 0);
            IntVector magnitude = h.and(0x7fff);
            IntVector finite = ((FloatVector)
                            magnitude.lanewise(VectorOperators.LSHL, 13).reinterpretAsFloats())
                    .mul(0x1p112f)
                    .reinterpretAsInts();
            IntVector special = magnitude.lanewise(VectorOperators.LSHL, 13).or(0x7f800000);
            IntVector bits = finite.blend(special, magnitude.compare(VectorOperators.GE, 0x7c00))
                    .or(h.and(0x8000).lanewise(VectorOperators.LSHL, 16));
            FloatVector product = bits.reinterpretAsFloats().mul(FloatVector.fromArray(HALF_D, x, xOff + i));
            acc = acc.add(product.convertShape(VectorOperators.F2D, D, 0));
        }
        // The lanes summed in a fixed order, as in dotF32.
        if (D.length() == 8) {
            acc = ((DoubleVector) acc.reinterpretShape(DoubleVector.SPECIES_256, 0))
                    .add((DoubleVector) acc.rearrange(UpperHalves.D512).reinterpretShape(DoubleVector.SPECIES_256, 0));
        }
        DoubleVector pair = ((DoubleVector) acc.reinterpretShape(DoubleVector.SPECIES_128, 0))
                .add((DoubleVector) acc.rearrange(UpperHalves.D256).reinterpretShape(DoubleVector.SPECIES_128, 0));
        double sum = pair.lane(0) + pair.lane(1);
        for (; i < n; i++) {
            sum += (double) Float.float16ToFloat(w.get(HALF, offset + 2L * i)) * x[xOff + i];
        }
        return (float) sum;
    }

    /** F32 weights · F32 activations: each product exact in double, summed in double lanes; {@code n} any length. */
    static float dotF32(MemorySegment w, long offset, float[] x, int xOff, int n) {
        DoubleVector acc = DoubleVector.zero(D);
        int step = D.length();
        int i = 0;
        for (; i + step <= n; i += step) {
            DoubleVector wv = (DoubleVector) FloatVector.fromMemorySegment(HALF_D, w, offset + 4L * i, LE)
                    .convertShape(VectorOperators.F2D, D, 0);
            DoubleVector xv =
                    (DoubleVector) FloatVector.fromArray(HALF_D, x, xOff + i).convertShape(VectorOperators.F2D, D, 0);
            acc = wv.fma(xv, acc);
        }
        // The lanes summed in a fixed order (halves added lane-wise): reduceLanes may add in another order
        // once compiled than before, and a result must not depend on how warm the JVM is.
        if (D.length() == 8) {
            acc = ((DoubleVector) acc.reinterpretShape(DoubleVector.SPECIES_256, 0))
                    .add((DoubleVector) acc.rearrange(UpperHalves.D512).reinterpretShape(DoubleVector.SPECIES_256, 0));
        }
        DoubleVector pair = ((DoubleVector) acc.reinterpretShape(DoubleVector.SPECIES_128, 0))
                .add((DoubleVector) acc.rearrange(UpperHalves.D256).reinterpretShape(DoubleVector.SPECIES_128, 0));
        double sum = pair.lane(0) + pair.lane(1);
        for (; i < n; i++) {
            sum += (double) w.get(FLOAT, offset + 4L * i) * x[xOff + i];
        }
        return (float) sum;
    }
}
