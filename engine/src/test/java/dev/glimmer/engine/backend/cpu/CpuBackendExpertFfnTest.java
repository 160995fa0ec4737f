package dev.glimmer.engine.backend.cpu;

import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.model.Backend;
import dev.glimmer.engine.model.GlmWeights;
import dev.glimmer.engine.model.WeightMatrix;
import dev.glimmer.engine.tensor.GgmlType;
import dev.glimmer.engine.tensor.Q4_0;
import dev.glimmer.engine.tensor.QuantizedVector;
import dev.glimmer.engine.tensor.VecDot;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The fused, multi-threaded expert FFN of the CPU backend against {@link Backend#expertFfn}'s plain
 * definition (token by token, slot by slot) computed with the tensor package's reference dots: Q4_0
 * experts as wide as the grouped kernels take (rows of 8-block steps), a batch whose experts are chosen
 * by 1, 2, 3, 4, 5, 7, 12, 16 and 37 slots (so every grouping path runs: groups of 16 through the batch
 * kernels, a last group of 12 padded to 16 lanes, then four tokens, a pair, single ones), with 1 and 2
 * threads; every output equals the reference's.
 */
class CpuBackendExpertFfnTest {
    private static final int WIDTH = 512;
    private static final int HIDDEN = 256;
    private static final int EXPERTS = 11;
    private static final int K = 2;

    @Test
    void q4_0ExpertsMatchThePlainDefinitionWithReferenceDots() {
        Random random = new Random(11);
        GlmWeights.Ffn[] ffns = new GlmWeights.Ffn[EXPERTS];
        for (int e = 0; e < EXPERTS; e++) {
            ffns[e] = new GlmWeights.Ffn(q4_0("gate" + e, HIDDEN, WIDTH, random), q4_0("up" + e, HIDDEN, WIDTH, random),
                    q4_0("down" + e, WIDTH, HIDDEN, random));
        }
        // 46 tokens, 2 slots each: expert e is chosen by counts[e] of the 92 slots.
        int[] counts = {1, 2, 3, 4, 5, 7, 37, 16, 12, 5, 0}; // expert 10 is chosen by none
        int n = 46;
        int[] chosen = new int[n * K];
        int slot = 0;
        for (int e = 0; e < EXPERTS; e++) {
            for (int c = 0; c < counts[e]; c++) {
                chosen[slot++] = e;
            }
        }
        // Spread each expert's slots over the batch; a token's two slots keep different experts.
        int[] spread = new int[n * K];
        for (int t = 0; t < n; t++) {
            spread[t * K] = chosen[t];
            spread[t * K + 1] = chosen[n + t];
        }
        float[] weights = new float[n * K];
        float[] x = new float[n * WIDTH];
        for (int i = 0; i < weights.length; i++) {
            weights[i] = random.nextFloat();
        }
        for (int i = 0; i < x.length; i++) {
            x[i] = (float) (random.nextGaussian() * Math.pow(10, random.nextInt(3) - 1));
        }

        float[] expected = new float[n * WIDTH];
        new ReferenceDots().expertFfn(ffns, spread, weights, K, x, n, new float[n * K * HIDDEN], expected);
        for (int threads = 1; threads <= 2; threads++) {
            float[] out = new float[n * WIDTH];
            new CpuBackend(threads).expertFfn(ffns, spread, weights, K, x, n, new float[n * K * HIDDEN], out);
            for (int i = 0; i < out.length; i++) {
                assertEquals(expected[i], out[i], "token " + i / WIDTH + " row " + i % WIDTH + " threads " + threads);
            }
        }
    }

    /** Random Q4_0 rows quantized by the reference quantizer, 2 bytes past an 8-byte boundary as in a file. */
    private static WeightMatrix q4_0(String name, int rows, int cols, Random random) {
        long rowBytes = GgmlType.Q4_0.rowBytes(cols);
        MemorySegment data = Arena.ofAuto().allocate(2 + rows * rowBytes).asSlice(2);
        float[] row = new float[cols];
        for (int r = 0; r < rows; r++) {
            for (int i = 0; i < cols; i++) {
                row[i] = (float) random.nextGaussian();
            }
            MemorySegment.copy(MemorySegment.ofArray(Q4_0.quantizeRow(row, 0, cols)), 0, data, r * rowBytes, rowBytes);
        }
        return new WeightMatrix(name, GgmlType.Q4_0, data, rows, cols);
    }

    /** A backend of the reference dots alone, so that {@link Backend#expertFfn}'s definition runs on them. */
    private static final class ReferenceDots implements Backend {
        @Override
        public void matmul(WeightMatrix w, float[] x, int xOff, int xStride, int n, float[] out, int outOff, int outStride) {
            for (int t = 0; t < n; t++) {
                QuantizedVector xq = QuantizedVector.forWeights(w.type());
                xq.quantize(x, xOff + t * xStride, w.cols());
                for (int r = 0; r < w.rows(); r++) {
                    out[outOff + t * outStride + r] = VecDot.dot(w.type(), w.data(), r * w.rowBytes(), xq, w.cols());
                }
            }
        }

        @Override
        public void embed(WeightMatrix table, int token, float[] out, int outOff) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void attention(KvCache cache, int layer, float[] q, int n, int firstPosition, int heads, float scale,
                              int valueWidth, float[] out) {
            throw new UnsupportedOperationException();
        }
    }
}
