package dev.glimmer.engine.backend.cpu;

import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

import dev.glimmer.engine.tensor.Q4_0;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * Q4_0 matrix-matrix products for batches (prompts), with the tokens in the vector lanes: a tile of
 * {@link #ROWS} weight rows is unpacked once into floats, and each of its values is multiplied with
 * the same activation value of {@link #TOKENS} tokens by one fma.
 *
 * <p>The numerics are exactly those of the tensor package's reference dot, token by token: the
 * unpacked weights {@code q-8} (|.| ≤ 8) and the Q8_0 activation quants (|.| ≤ 127) are small
 * integers, so in float every product and every partial sum of a block of 32 (|.| ≤ 32,512 &lt; 2^24) is
 * exact: each lane ends the block holding its exact integer sum. That sum is scaled by the float
 * {@code fp16(d_w)·d_x} in double (exact there) and the blocks are added in order in one double per
 * token, as the reference adds them. (The single-token kernels of {@link Kernels} add the same
 * exact terms in a few lane sums instead, so the two may differ by double rounding.)
 *
 * <p>Why floats: the Vector API has no integer dot-product operation, so integer kernels pay for
 * 16-bit multiplies, lane folding and conversions per token, while here each token costs one fma per
 * weight value, 16 tokens at a time, and the unpacking is paid once per tile. The activation quants
 * are kept as floats, transposed: value {@code c} of the 16 tokens of a group is one vector
 * ({@link ActivationRows} lays them out).
 */
final class BatchKernels {
    /** Tokens per group: the float lanes of a 512-bit vector. */
    static final int TOKENS = 16;
    /** Weight rows per tile. */
    static final int ROWS = 4;
    private static final int QK = Q4_0.BLOCK_SIZE;
    private static final int BLOCK_BYTES = Q4_0.BLOCK_BYTES;
    private static final VectorSpecies<Float> F = FloatVector.SPECIES_512;
    private static final VectorSpecies<Float> F8 = FloatVector.SPECIES_256;
    private static final VectorSpecies<Double> D = DoubleVector.SPECIES_512;
    private static final VectorSpecies<Byte> B16 = ByteVector.SPECIES_128;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    private static final ValueLayout.OfShort HALF = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(LE);

    private BatchKernels() {
    }

    /** Whether these kernels can run here: 16 float lanes (AVX-512 and the like). */
    static boolean supported() {
        return FloatVector.SPECIES_PREFERRED.length() == TOKENS;
    }

    /**
     * Unpacks Q4_0 row {@code offset} of {@code blocks} blocks into {@code wq[at ..]} (the values
     * {@code q-8} in order, as floats) and its block scales into {@code wd[dAt ..]}.
     */
    static void unpackQ4_0(MemorySegment w, long offset, int blocks, float[] wq, int at, float[] wd, int dAt) {
        for (int b = 0; b < blocks; b++) {
            long wb = offset + (long) b * BLOCK_BYTES;
            ByteVector packed = ByteVector.fromMemorySegment(B16, w, wb + 2, LE);
            FloatVector lo = (FloatVector) packed.and((byte) 0x0F).convertShape(VectorOperators.B2F, F, 0);
            FloatVector hi = (FloatVector) packed.lanewise(VectorOperators.LSHR, 4).convertShape(VectorOperators.B2F, F, 0);
            lo.sub(8f).intoArray(wq, at + b * QK);
            hi.sub(8f).intoArray(wq, at + b * QK + QK / 2);
            wd[dAt + b] = Float.float16ToFloat(w.get(HALF, wb));
        }
    }

    /**
     * The {@link #ROWS} unpacked rows {@code wq[wAt + r·cols ..]} (scales {@code wd[wdAt + r·cols/32 ..]}) times one
     * group of 16 tokens ({@code xq[xAt + 16c + lane]}: value c of token lane; {@code xd[xdAt + 16b + lane]}:
     * its block scales), into {@code out[16r + lane]}.
     */
    static void dot4x16(float[] wq, int wAt, float[] wd, int wdAt, int cols, float[] xq, int xAt, float[] xd, int xdAt, float[] out) {
        int blocks = cols / QK;
        int w0 = wAt;
        int w1 = wAt + cols;
        int w2 = wAt + 2 * cols;
        int w3 = wAt + 3 * cols;
        DoubleVector lo0 = DoubleVector.zero(D);
        DoubleVector hi0 = DoubleVector.zero(D);
        DoubleVector lo1 = DoubleVector.zero(D);
        DoubleVector hi1 = DoubleVector.zero(D);
        DoubleVector lo2 = DoubleVector.zero(D);
        DoubleVector hi2 = DoubleVector.zero(D);
        DoubleVector lo3 = DoubleVector.zero(D);
        DoubleVector hi3 = DoubleVector.zero(D);
        for (int b = 0; b < blocks; b++) {
            // Two partial sums per row (even and odd values): independent fma chains keep both fma
            // units busy; the sums are exact integers, so adding them later changes nothing.
            FloatVector a0 = FloatVector.zero(F);
            FloatVector a1 = FloatVector.zero(F);
            FloatVector a2 = FloatVector.zero(F);
            FloatVector a3 = FloatVector.zero(F);
            FloatVector e0 = FloatVector.zero(F);
            FloatVector e1 = FloatVector.zero(F);
            FloatVector e2 = FloatVector.zero(F);
            FloatVector e3 = FloatVector.zero(F);
            int c0 = b * QK;
            for (int j = 0; j < QK; j += 2) {
                int c = c0 + j;
                FloatVector x = FloatVector.fromArray(F, xq, xAt + c * TOKENS);
                FloatVector y = FloatVector.fromArray(F, xq, xAt + (c + 1) * TOKENS);
                a0 = x.fma(FloatVector.broadcast(F, wq[w0 + c]), a0);
                a1 = x.fma(FloatVector.broadcast(F, wq[w1 + c]), a1);
                a2 = x.fma(FloatVector.broadcast(F, wq[w2 + c]), a2);
                a3 = x.fma(FloatVector.broadcast(F, wq[w3 + c]), a3);
                e0 = y.fma(FloatVector.broadcast(F, wq[w0 + c + 1]), e0);
                e1 = y.fma(FloatVector.broadcast(F, wq[w1 + c + 1]), e1);
                e2 = y.fma(FloatVector.broadcast(F, wq[w2 + c + 1]), e2);
                e3 = y.fma(FloatVector.broadcast(F, wq[w3 + c + 1]), e3);
            }
            a0 = a0.add(e0);
            a1 = a1.add(e1);
            a2 = a2.add(e2);
            a3 = a3.add(e3);
            FloatVector dx = FloatVector.fromArray(F, xd, xdAt + b * TOKENS);
            FloatVector s0 = dx.mul(wd[wdAt + b]);
            FloatVector s1 = dx.mul(wd[wdAt + blocks + b]);
            FloatVector s2 = dx.mul(wd[wdAt + 2 * blocks + b]);
            FloatVector s3 = dx.mul(wd[wdAt + 3 * blocks + b]);
            lo0 = ((DoubleVector) a0.convertShape(VectorOperators.F2D, D, 0)).fma((DoubleVector) s0.convertShape(VectorOperators.F2D, D, 0), lo0);
            hi0 = ((DoubleVector) a0.convertShape(VectorOperators.F2D, D, 1)).fma((DoubleVector) s0.convertShape(VectorOperators.F2D, D, 1), hi0);
            lo1 = ((DoubleVector) a1.convertShape(VectorOperators.F2D, D, 0)).fma((DoubleVector) s1.convertShape(VectorOperators.F2D, D, 0), lo1);
            hi1 = ((DoubleVector) a1.convertShape(VectorOperators.F2D, D, 1)).fma((DoubleVector) s1.convertShape(VectorOperators.F2D, D, 1), hi1);
            lo2 = ((DoubleVector) a2.convertShape(VectorOperators.F2D, D, 0)).fma((DoubleVector) s2.convertShape(VectorOperators.F2D, D, 0), lo2);
            hi2 = ((DoubleVector) a2.convertShape(VectorOperators.F2D, D, 1)).fma((DoubleVector) s2.convertShape(VectorOperators.F2D, D, 1), hi2);
            lo3 = ((DoubleVector) a3.convertShape(VectorOperators.F2D, D, 0)).fma((DoubleVector) s3.convertShape(VectorOperators.F2D, D, 0), lo3);
            hi3 = ((DoubleVector) a3.convertShape(VectorOperators.F2D, D, 1)).fma((DoubleVector) s3.convertShape(VectorOperators.F2D, D, 1), hi3);
        }
        ((FloatVector) lo0.convertShape(VectorOperators.D2F, F8, 0)).intoArray(out, 0);
        ((FloatVector) hi0.convertShape(VectorOperators.D2F, F8, 0)).intoArray(out, 8);
        ((FloatVector) lo1.convertShape(VectorOperators.D2F, F8, 0)).intoArray(out, 16);
        ((FloatVector) hi1.convertShape(VectorOperators.D2F, F8, 0)).intoArray(out, 24);
        ((FloatVector) lo2.convertShape(VectorOperators.D2F, F8, 0)).intoArray(out, 32);
        ((FloatVector) hi2.convertShape(VectorOperators.D2F, F8, 0)).intoArray(out, 40);
        ((FloatVector) lo3.convertShape(VectorOperators.D2F, F8, 0)).intoArray(out, 48);
        ((FloatVector) hi3.convertShape(VectorOperators.D2F, F8, 0)).intoArray(out, 56);
    }

    /**
     * {@link #dot4x16} for two lane groups at once (32 tokens: group at {@code xAt} and the next one, at
     * {@code xAt + 16·cols}, its scales at {@code xdAt + 16·cols/32}), into {@code out[32r + 16h + lane]}
     * (h: the group): each broadcast weight value serves two fmas, and the eight sums of a block are
     * eight independent fma chains. The same operations per token as {@link #dot4x16}.
     */
    static void dot4x32(float[] wq, int wAt, float[] wd, int wdAt, int cols, float[] xq, int xAt, float[] xd, int xdAt, float[] out) {
        int blocks = cols / QK;
        int w1 = wAt + cols;
        int w2 = wAt + 2 * cols;
        int w3 = wAt + 3 * cols;
        int yAt = xAt + cols * TOKENS;
        int ydAt = xdAt + blocks * TOKENS;
        DoubleVector lo0 = DoubleVector.zero(D);
        DoubleVector hi0 = DoubleVector.zero(D);
        DoubleVector lo1 = DoubleVector.zero(D);
        DoubleVector hi1 = DoubleVector.zero(D);
        DoubleVector lo2 = DoubleVector.zero(D);
        DoubleVector hi2 = DoubleVector.zero(D);
        DoubleVector lo3 = DoubleVector.zero(D);
        DoubleVector hi3 = DoubleVector.zero(D);
        DoubleVector mo0 = DoubleVector.zero(D);
        DoubleVector ni0 = DoubleVector.zero(D);
        DoubleVector mo1 = DoubleVector.zero(D);
        DoubleVector ni1 = DoubleVector.zero(D);
        DoubleVector mo2 = DoubleVector.zero(D);
        DoubleVector ni2 = DoubleVector.zero(D);
        DoubleVector mo3 = DoubleVector.zero(D);
        DoubleVector ni3 = DoubleVector.zero(D);
        for (int b = 0; b < blocks; b++) {
            FloatVector a0 = FloatVector.zero(F);
            FloatVector a1 = FloatVector.zero(F);
            FloatVector a2 = FloatVector.zero(F);
            FloatVector a3 = FloatVector.zero(F);
            FloatVector e0 = FloatVector.zero(F);
            FloatVector e1 = FloatVector.zero(F);
            FloatVector e2 = FloatVector.zero(F);
            FloatVector e3 = FloatVector.zero(F);
            int c0 = b * QK;
            for (int j = 0; j < QK; j++) {
                int c = c0 + j;
                FloatVector x = FloatVector.fromArray(F, xq, xAt + c * TOKENS);
                FloatVector y = FloatVector.fromArray(F, xq, yAt + c * TOKENS);
                FloatVector v0 = FloatVector.broadcast(F, wq[wAt + c]);
                FloatVector v1 = FloatVector.broadcast(F, wq[w1 + c]);
                FloatVector v2 = FloatVector.broadcast(F, wq[w2 + c]);
                FloatVector v3 = FloatVector.broadcast(F, wq[w3 + c]);
                a0 = x.fma(v0, a0);
                a1 = x.fma(v1, a1);
                a2 = x.fma(v2, a2);
                a3 = x.fma(v3, a3);
                e0 = y.fma(v0, e0);
                e1 = y.fma(v1, e1);
                e2 = y.fma(v2, e2);
                e3 = y.fma(v3, e3);
            }
            FloatVector dx = FloatVector.fromArray(F, xd, xdAt + b * TOKENS);
            FloatVector dy = FloatVector.fromArray(F, xd, ydAt + b * TOKENS);
            FloatVector s0 = dx.mul(wd[wdAt + b]);
            FloatVector s1 = dx.mul(wd[wdAt + blocks + b]);
            FloatVector s2 = dx.mul(wd[wdAt + 2 * blocks + b]);
            FloatVector s3 = dx.mul(wd[wdAt + 3 * blocks + b]);
            FloatVector t0 = dy.mul(wd[wdAt + b]);
            FloatVector t1 = dy.mul(wd[wdAt + blocks + b]);
            FloatVector t2 = dy.mul(wd[wdAt + 2 * blocks + b]);
            FloatVector t3 = dy.mul(wd[wdAt + 3 * blocks + b]);
            lo0 = ((DoubleVector) a0.convertShape(VectorOperators.F2D, D, 0)).fma((DoubleVector) s0.convertShape(VectorOperators.F2D, D, 0), lo0);
            hi0 = ((DoubleVector) a0.convertShape(VectorOperators.F2D, D, 1)).fma((DoubleVector) s0.convertShape(VectorOperators.F2D, D, 1), hi0);
            lo1 = ((DoubleVector) a1.convertShape(VectorOperators.F2D, D, 0)).fma((DoubleVector) s1.convertShape(VectorOperators.F2D, D, 0), lo1);
            hi1 = ((DoubleVector) a1.convertShape(VectorOperators.F2D, D, 1)).fma((DoubleVector) s1.convertShape(VectorOperators.F2D, D, 1), hi1);
            lo2 = ((DoubleVector) a2.convertShape(VectorOperators.F2D, D, 0)).fma((DoubleVector) s2.convertShape(VectorOperators.F2D, D, 0), lo2);
            hi2 = ((DoubleVector) a2.convertShape(VectorOperators.F2D, D, 1)).fma((DoubleVector) s2.convertShape(VectorOperators.F2D, D, 1), hi2);
            lo3 = ((DoubleVector) a3.convertShape(VectorOperators.F2D, D, 0)).fma((DoubleVector) s3.convertShape(VectorOperators.F2D, D, 0), lo3);
            hi3 = ((DoubleVector) a3.convertShape(VectorOperators.F2D, D, 1)).fma((DoubleVector) s3.convertShape(VectorOperators.F2D, D, 1), hi3);
            mo0 = ((DoubleVector) e0.convertShape(VectorOperators.F2D, D, 0)).fma((DoubleVector) t0.convertShape(VectorOperators.F2D, D, 0), mo0);
            ni0 = ((DoubleVector) e0.convertShape(VectorOperators.F2D, D, 1)).fma((DoubleVector) t0.convertShape(VectorOperators.F2D, D, 1), ni0);
            mo1 = ((DoubleVector) e1.convertShape(VectorOperators.F2D, D, 0)).fma((DoubleVector) t1.convertShape(VectorOperators.F2D, D, 0), mo1);
            ni1 = ((DoubleVector) e1.convertShape(VectorOperators.F2D, D, 1)).fma((DoubleVector) t1.convertShape(VectorOperators.F2D, D, 1), ni1);
            mo2 = ((DoubleVector) e2.convertShape(VectorOperators.F2D, D, 0)).fma((DoubleVector) t2.convertShape(VectorOperators.F2D, D, 0), mo2);
            ni2 = ((DoubleVector) e2.convertShape(VectorOperators.F2D, D, 1)).fma((DoubleVector) t2.convertShape(VectorOperators.F2D, D, 1), ni2);
            mo3 = ((DoubleVector) e3.convertShape(VectorOperators.F2D, D, 0)).fma((DoubleVector) t3.convertShape(VectorOperators.F2D, D, 0), mo3);
            ni3 = ((DoubleVector) e3.convertShape(VectorOperators.F2D, D, 1)).fma((DoubleVector) t3.convertShape(VectorOperators.F2D, D, 1), ni3);
        }
        ((FloatVector) lo0.convertShape(VectorOperators.D2F, F8, 0)).intoArray(out, 0);
        ((FloatVector) hi0.convertShape(VectorOperators.D2F, F8, 0)).intoArray(out, 8);
        ((FloatVector) mo0.convertShape(VectorOperators.D2F, F8, 0)).intoArray(out, 16);
        ((FloatVector) ni0.convertShape(VectorOperators.D2F, F8, 0)).intoArray(out, 24);
        ((FloatVector) lo1.convertShape(VectorOperators.D2F, F8, 0)).intoArray(out, 32);
        ((FloatVector) hi1.convertShape(VectorOperators.D2F, F8, 0)).intoArray(out, 40);
        ((FloatVector) mo1.convertShape(VectorOperators.D2F, F8, 0)).intoArray(out, 48);
        ((FloatVector) ni1.convertShape(VectorOperators.D2F, F8, 0)).intoArray(out, 56);
        ((FloatVector) lo2.convertShape(VectorOperators.D2F, F8, 0)).intoArray(out, 64);
        ((FloatVector) hi2.convertShape(VectorOperators.D2F, F8, 0)).intoArray(out, 72);
        ((FloatVector) mo2.convertShape(VectorOperators.D2F, F8, 0)).intoArray(out, 80);
        ((FloatVector) ni2.convertShape(VectorOperators.D2F, F8, 0)).intoArray(out, 88);
        ((FloatVector) lo3.convertShape(VectorOperators.D2F, F8, 0)).intoArray(out, 96);
        ((FloatVector) hi3.convertShape(VectorOperators.D2F, F8, 0)).intoArray(out, 104);
        ((FloatVector) mo3.convertShape(VectorOperators.D2F, F8, 0)).intoArray(out, 112);
        ((FloatVector) ni3.convertShape(VectorOperators.D2F, F8, 0)).intoArray(out, 120);
    }
}
