package dev.glimmer.engine.backend.cpu;

import dev.glimmer.engine.kv.KvCache;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * MLA attention over the latent cache, parallel and reading each cache row once per tile of tokens for all heads (in
 * MLA every head attends over the same latent rows). The tokens of one call are consecutive positions of one
 * sequence (a prompt chunk, or one decode row); they go in tiles of up to {@link #MAX_TILE}, and a cache row is read
 * (and converted from 16 bits) once per tile rather than once per token: at a few thousand positions of context a
 * prompt's time is nearly all attention, and before tiles it was nearly all reading rows. Per tile, three parallel
 * phases:
 * <ol>
 *   <li>scores: positions split among threads; each row is read once and dotted with every head's query of every
 *       token of the tile that sees it;</li>
 *   <li>softmax: (token, head) pairs split among threads (ggml's: exponentials in float, their sum in double);</li>
 *   <li>values: the value dimension split among threads; each reads its part of every row once per tile and adds
 *       it, weighted, to every head's output of every token that sees it, position after position (per value, the
 *       order of the scalar reference, so the sums are the same whatever the tile).</li>
 * </ol>
 * Every score and every output is computed exactly as for a lone token: tiling changes what is read when, not a bit
 * of the result. Buffers grow with the context and are reused: nothing is allocated once they have.
 */
final class CpuAttention implements WorkerPool.Task {
    private static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    /** Positions read together into a worker's buffer per pass over the queries or the outputs. */
    private static final int BLOCK = 16;
    /** Tokens per tile at most. */
    static final int MAX_TILE = 32;
    /** Scores a tile may hold at most (tokens × heads × positions): a tile is smaller at a very long context. */
    private static final int MAX_TILE_SCORES = 4 << 20;

    private final WorkerPool pool;
    private float[][] rows = new float[0][];
    private short[][] halves = new short[0][];
    /** The tile's scores, then probabilities: token tt, head h, position u at {@code (tt*heads + h)*stride + u}. */
    private float[] scores = new float[0];

    private KvCache cache;
    private int layer;
    private float[] q;
    private int heads;
    private float scale;
    private int valueWidth;
    private float[] out;
    /** The tile: its first token (of the call), its tokens, and the first one's position. */
    private int tileFirst;

    private int tileSize;
    private int firstLength;
    /** Positions the tile's last token sees: the scores' row stride. */
    private int stride;

    private int phase;

    CpuAttention(WorkerPool pool) {
        this.pool = pool;
    }

    /**
     * Attention of {@code n} tokens at positions {@code firstPosition ..} of {@code cache} (already written there),
     * each over the positions up to its own: queries {@code q[t][h][width]}, outputs {@code out[t][h][valueWidth]}.
     */
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
        int rowFloats = BLOCK * Math.max(width, valueWidth);
        if (rows.length < pool.threads() || rows[0].length < rowFloats) {
            rows = new float[pool.threads()][rowFloats];
            halves = new short[pool.threads()][width];
        }
        this.cache = cache;
        this.layer = layer;
        this.q = q;
        this.heads = heads;
        this.scale = scale;
        this.valueWidth = valueWidth;
        this.out = out;
        for (int first = 0; first < n; first += tileSize) {
            int last = firstPosition + n; // positions the call's last token sees
            tileSize = Math.max(1, Math.min(Math.min(MAX_TILE, n - first), MAX_TILE_SCORES / (heads * last)));
            tileFirst = first;
            firstLength = firstPosition + first + 1;
            stride = firstLength + tileSize - 1;
            if (scores.length < tileSize * heads * stride) {
                // Enough for every tile at this capacity, so that it is allocated once (decode allocates nothing).
                long tiles = Math.min(MAX_TILE_SCORES, (long) MAX_TILE * heads * cache.capacity());
                scores = new float[(int) Math.max(tiles, (long) heads * cache.capacity())];
            }
            boolean parallel = (long) stride * tileSize * heads * width >= 32_768;
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

    /** Positions token {@code tt} of the tile sees. */
    private int length(int tt) {
        return firstLength + tt;
    }

    /**
     * {@code scores[(tt*heads + h)*stride + u] = scale · (Q_tt,h · K_u)} for this share of the positions, for every
     * token of the tile that sees position u.
     */
    private void scores(int worker, int workers) {
        int width = cache.rowWidth();
        float[] block = rows[worker];
        int from = CpuBackend.shareStart(stride, worker, workers);
        int to = CpuBackend.shareStart(stride, worker + 1, workers);
        for (int u0 = from; u0 < to; u0 += BLOCK) {
            int us = Math.min(BLOCK, to - u0);
            for (int j = 0; j < us; j++) {
                cache.read(layer, u0 + j, 0, width, block, j * width, halves[worker]);
            }
            // The first token that sees position u0 is the one at u0 (or the tile's first).
            for (int tt = Math.max(0, u0 - firstLength + 1); tt < tileSize; tt++) {
                int seen = Math.min(us, length(tt) - u0);
                int qBase = (tileFirst + tt) * heads * width;
                for (int h = 0; h < heads; h++) {
                    int s = (tt * heads + h) * stride + u0;
                    for (int j = 0; j < seen; j++) {
                        scores[s + j] = dot(q, qBase + h * width, block, j * width, width) * scale;
                    }
                }
            }
        }
    }

    /** {@code q[qo ..] · row[ro ..]} over {@code width} values, its lanes summed in a fixed order. */
    private static float dot(float[] q, int qo, float[] row, int ro, int width) {
        int vectorEnd = F.loopBound(width);
        FloatVector acc = FloatVector.zero(F);
        int i = 0;
        for (; i < vectorEnd; i += F.length()) {
            acc = FloatVector.fromArray(F, q, qo + i).fma(FloatVector.fromArray(F, row, ro + i), acc);
        }
        // Lanes summed in a fixed order (halves added lane-wise): reduceLanes may add in another
        // order once compiled than before, and results must not depend on how warm the JVM is.
        if (F.length() == 16) {
            acc = ((FloatVector) acc.reinterpretShape(FloatVector.SPECIES_256, 0))
                    .add((FloatVector) acc.rearrange(UpperHalves.F512).reinterpretShape(FloatVector.SPECIES_256, 0));
        }
        FloatVector quad = ((FloatVector) acc.reinterpretShape(FloatVector.SPECIES_128, 0))
                .add((FloatVector) acc.rearrange(UpperHalves.F256).reinterpretShape(FloatVector.SPECIES_128, 0));
        float sum = quad.lane(0) + quad.lane(1) + quad.lane(2) + quad.lane(3);
        for (; i < width; i++) {
            sum += q[qo + i] * row[ro + i];
        }
        return sum;
    }

    /** Softmax of the scores of this share of the tile's (token, head) pairs, in place, normalized. */
    private void softmax(int worker, int workers) {
        int pairs = tileSize * heads;
        for (int p = CpuBackend.shareStart(pairs, worker, workers);
                p < CpuBackend.shareStart(pairs, worker + 1, workers);
                p++) {
            int base = p * stride;
            int length = length(p / heads);
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
     * {@code out[t][h][i] = Σ_u p_t,h[u] · V_u[i]} for this share of the values i, every token of the tile and every
     * head. Positions go in blocks of {@link #BLOCK}: their values are read once into {@code rows[worker]}, then each
     * output is loaded once per block and the block's terms it sees added to it in position order.
     */
    private void values(int worker, int workers) {
        float[] block = rows[worker];
        int from = CpuBackend.shareStart(valueWidth / F.length(), worker, workers) * F.length();
        int to = worker + 1 == workers
                ? valueWidth
                : CpuBackend.shareStart(valueWidth / F.length(), worker + 1, workers) * F.length();
        int count = to - from;
        for (int tt = 0; tt < tileSize; tt++) {
            for (int h = 0; h < heads; h++) {
                int o = ((tileFirst + tt) * heads + h) * valueWidth;
                java.util.Arrays.fill(out, o + from, o + to, 0f);
            }
        }
        int vectorEnd = F.loopBound(count);
        for (int u0 = 0; u0 < stride; u0 += BLOCK) {
            int us = Math.min(BLOCK, stride - u0);
            for (int j = 0; j < us; j++) {
                cache.read(layer, u0 + j, from, count, block, j * count, halves[worker]);
            }
            for (int tt = Math.max(0, u0 - firstLength + 1); tt < tileSize; tt++) {
                int seen = Math.min(us, length(tt) - u0);
                for (int h = 0; h < heads; h++) {
                    int o = ((tileFirst + tt) * heads + h) * valueWidth + from;
                    int p = (tt * heads + h) * stride + u0;
                    int i = 0;
                    for (; i < vectorEnd; i += F.length()) {
                        FloatVector acc = FloatVector.fromArray(F, out, o + i);
                        for (int j = 0; j < seen; j++) {
                            // Multiply, then add (two roundings), as the scalar reference does.
                            acc = acc.add(FloatVector.fromArray(F, block, j * count + i)
                                    .mul(scores[p + j]));
                        }
                        acc.intoArray(out, o + i);
                    }
                    for (; i < count; i++) {
                        float acc = out[o + i];
                        for (int j = 0; j < seen; j++) {
                            acc += scores[p + j] * block[j * count + i];
                        }
                        out[o + i] = acc;
                    }
                }
            }
        }
    }
}
