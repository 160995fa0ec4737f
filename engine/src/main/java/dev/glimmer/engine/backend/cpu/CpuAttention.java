package dev.glimmer.engine.backend.cpu;

import dev.glimmer.engine.kv.KvCache;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * MLA attention over the latent cache, parallel and reading each cache row once per token for all
 * heads (in MLA every head attends over the same latent rows). Per token, three parallel phases:
 * <ol>
 *   <li>scores: positions split among threads; each row is read once and dotted with every head's query;</li>
 *   <li>softmax: heads split among threads (ggml's: exponentials in float, their sum in double);</li>
 *   <li>values: the value dimension split among threads; each reads its part of every row once and adds
 *       it, weighted, to every head's output, position after position (per value, the order of the
 *       scalar reference, so the sums are the same).</li>
 * </ol>
 * Buffers grow with the context and are reused: nothing is allocated once they have.
 */
final class CpuAttention implements WorkerPool.Task {
    private static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    /** Positions whose values are added per pass over the outputs. */
    private static final int BLOCK = 16;

    private final WorkerPool pool;
    private float[][] rows = new float[0][];
    private short[][] halves = new short[0][];
    private float[] scores = new float[0];

    private KvCache cache;
    private int layer;
    private float[] q;
    private int qOff;
    private int heads;
    private int length;
    private float scale;
    private int valueWidth;
    private float[] out;
    private int outOff;
    private int phase;

    CpuAttention(WorkerPool pool) {
        this.pool = pool;
    }

    void compute(
            KvCache cache,
            int layer,
            float[] q,
            int n,
            int firstPosition,
            int heads,
            float scale,
            int valueWidth,
            float[] out) {
        int width = cache.rowWidth();
        int capacity = cache.capacity();
        if (rows.length < pool.threads() || rows[0].length < Math.max(width, BLOCK * valueWidth)) {
            rows = new float[pool.threads()][Math.max(width, BLOCK * valueWidth)];
            halves = new short[pool.threads()][width];
        }
        if (scores.length < heads * capacity) {
            scores = new float[heads * capacity];
        }
        this.cache = cache;
        this.layer = layer;
        this.heads = heads;
        this.scale = scale;
        this.valueWidth = valueWidth;
        this.out = out;
        for (int t = 0; t < n; t++) {
            this.q = q;
            this.qOff = t * heads * width;
            this.outOff = t * heads * valueWidth;
            this.length = firstPosition + t + 1;
            boolean parallel = (long) length * heads * width >= 32_768;
            for (phase = 0; phase < 3; phase++) {
                if (parallel) {
                    pool.run(this);
                } else {
                    run(0, 1);
                }
            }
        }
        this.cache = null;
        this.q = null;
        this.out = null;
    }

    @Override
    public void run(int worker, int workers) {
        switch (phase) {
            case 0 -> scores(worker, workers);
            case 1 -> softmax(worker, workers);
            default -> values(worker, workers);
        }
    }

    /** {@code scores[h*capacity + u] = scale · (Q_h · K_u)} for this share of the positions. */
    private void scores(int worker, int workers) {
        int width = cache.rowWidth();
        int capacity = cache.capacity();
        float[] row = rows[worker];
        int from = CpuBackend.shareStart(length, worker, workers);
        int to = CpuBackend.shareStart(length, worker + 1, workers);
        int vectorEnd = F.loopBound(width);
        for (int u = from; u < to; u++) {
            cache.read(layer, u, 0, width, row, 0, halves[worker]);
            for (int h = 0; h < heads; h++) {
                int qo = qOff + h * width;
                FloatVector acc = FloatVector.zero(F);
                int i = 0;
                for (; i < vectorEnd; i += F.length()) {
                    acc = FloatVector.fromArray(F, q, qo + i).fma(FloatVector.fromArray(F, row, i), acc);
                }
                // Lanes summed in a fixed order (halves added lane-wise): reduceLanes may add in another
                // order once compiled than before, and results must not depend on how warm the JVM is.
                if (F.length() == 16) {
                    acc = ((FloatVector) acc.reinterpretShape(FloatVector.SPECIES_256, 0)).add((FloatVector)
                            acc.rearrange(UpperHalves.F512).reinterpretShape(FloatVector.SPECIES_256, 0));
                }
                FloatVector quad = ((FloatVector) acc.reinterpretShape(FloatVector.SPECIES_128, 0)).add((FloatVector)
                        acc.rearrange(UpperHalves.F256).reinterpretShape(FloatVector.SPECIES_128, 0));
                float sum = quad.lane(0) + quad.lane(1) + quad.lane(2) + quad.lane(3);
                for (; i < width; i++) {
                    sum += q[qo + i] * row[i];
                }
                scores[h * capacity + u] = sum * scale;
            }
        }
    }

    /** Softmax of each head's scores in this share of the heads, in place, normalized. */
    private void softmax(int worker, int workers) {
        int capacity = cache.capacity();
        for (int h = CpuBackend.shareStart(heads, worker, workers);
                h < CpuBackend.shareStart(heads, worker + 1, workers);
                h++) {
            int base = h * capacity;
            float max = Float.NEGATIVE_INFINITY;
            for (int u = 0; u < length; u++) {
                max = Math.max(max, scores[base + u]);
            }
            double sum = 0;
            for (int u = 0; u < length; u++) {
                float e = (float) Math.exp(scores[base + u] - max);
                scores[base + u] = e;
                sum += e;
            }
            float inv = (float) (1.0 / sum);
            for (int u = 0; u < length; u++) {
                scores[base + u] *= inv;
            }
        }
    }

    /**
     * {@code out[h][i] = Σ_u p_h[u] · V_u[i]} for this share of the values i, every head. Positions go in
     * blocks of {@link #BLOCK}: their values are read once into {@code rows[worker]}, then each head's
     * outputs are loaded once per block and the block's terms added to them in position order.
     */
    private void values(int worker, int workers) {
        int capacity = cache.capacity();
        float[] block = rows[worker];
        int from = CpuBackend.shareStart(valueWidth / F.length(), worker, workers) * F.length();
        int to = worker + 1 == workers
                ? valueWidth
                : CpuBackend.shareStart(valueWidth / F.length(), worker + 1, workers) * F.length();
        int count = to - from;
        for (int h = 0; h < heads; h++) {
            java.util.Arrays.fill(out, outOff + h * valueWidth + from, outOff + h * valueWidth + to, 0f);
        }
        int vectorEnd = F.loopBound(count);
        for (int u0 = 0; u0 < length; u0 += BLOCK) {
            int us = Math.min(BLOCK, length - u0);
            for (int j = 0; j < us; j++) {
                cache.read(layer, u0 + j, from, count, block, j * count, halves[worker]);
            }
            for (int h = 0; h < heads; h++) {
                int o = outOff + h * valueWidth + from;
                int p = h * capacity + u0;
                int i = 0;
                for (; i < vectorEnd; i += F.length()) {
                    FloatVector acc = FloatVector.fromArray(F, out, o + i);
                    for (int j = 0; j < us; j++) {
                        // Multiply, then add (two roundings), as the scalar reference does.
                        acc = acc.add(
                                FloatVector.fromArray(F, block, j * count + i).mul(scores[p + j]));
                    }
                    acc.intoArray(out, o + i);
                }
                for (; i < count; i++) {
                    float acc = out[o + i];
                    for (int j = 0; j < us; j++) {
                        acc += scores[p + j] * block[j * count + i];
                    }
                    out[o + i] = acc;
                }
            }
        }
    }
}
