package dev.glimmer.engine.model;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.kv.KvCache;
import java.util.Arrays;

/**
 * The forward pass of GLM-4.7-Flash (docs/MODEL.md §4), top to bottom: embedding, then per layer
 * RMSNorm → MLA attention with absorbed k_b/v_b over the latent KV cache → RMSNorm → dense FFN or
 * MoE block, then the output head. A batch of tokens goes through each layer together (causal
 * attention), in chunks of at most {@code maxBatch} tokens.
 *
 * <p>The heavy operations go through a {@link Backend}; the scalar math that decides results at
 * the bit level (RMSNorm with a double sum, RoPE with float32 angles, sigmoid/softmax, expert
 * weights) is here and follows ggml. One instance per sequence being computed: it owns scratch
 * buffers sized from the config and {@code maxBatch}, allocated once.
 */
public final class GlmForward {
    /** Tokens per chunk when a caller does not choose. */
    public static final int DEFAULT_BATCH = 512;
    /** llama.cpp's lower bound for the sum of the selected experts' weights before normalizing. */
    private static final float MIN_WEIGHT_SUM = 6.103515625e-5f;

    private final GlmConfig c;
    private final GlmWeights w;
    private final Backend backend;
    private final int maxBatch;
    private final int vocab;
    private ForwardListener listener;

    // Scratch, [token][...] row-major, sized for maxBatch tokens.
    private final float[] x; // residual stream [E]
    private final float[] h; // normed input of a sub-block [E]
    private final float[] qa; // q_a projection [q_lora_rank]
    private final float[] q; // queries [H][key_length_mla]
    private final float[] kv; // kv_a projection [kv_lora_rank + rope]
    private final float[] kRow; // the latent cache rows of this batch [kv_lora_rank + rope]
    private final float[] qFull; // absorbed queries [H][kv_lora_rank + rope]
    private final float[] oLatent; // attention output in latent space [H][kv_lora_rank]
    private final float[] o; // per-head values [H][value_length_mla]
    private final float[] sub; // output of a sub-block [E]
    private final float[] act; // SwiGLU rows of the FFNs, one per token and slot [K][widest FFN]
    private final float[] shared; // shared expert output [E]
    private final float[] routerLogits; // [X]
    private final float[] probs; // [X]
    private final float[] selection; // [X]
    private final int[] chosen; // [K] expert ids in selection order
    private final float[] chosenWeights; // [K]
    private final GlmWeights.Ffn[] single = new GlmWeights.Ffn[1]; // a dense FFN as the one "expert"
    private final int[] firstExpert; // [1] per token: expert 0 of {single}
    private final float[] unitWeights; // [1] per token: weight 1
    private final float[] ropeCos; // [rope/2] per token
    private final float[] ropeSin;
    private final float[] lastLogits;
    // Where each row of the batch goes: its sequence's cache and position. The rows form runs: run r is rows
    // runFirst[r] .. runFirst[r+1]-1, consecutive positions of one cache that attend together (a prompt chunk of one
    // sequence is one run, a prompt pass of several sequences one run each; a decode step's rows are one run each).
    private final KvCache[] rowCache;
    private final int[] rowPosition;
    private final int[] runFirst;
    private int runs;
    private float[] qRun; // the rows of qFull of one run, for the attention of a run that is not the whole batch
    private float[] oRun; // their rows of oLatent
    // The hand-over to the NextN block (null without one): the trunk's output rows, normed; the block's input.
    private final float[] hidden; // rms(x, output_norm) of the last pass's rows [E]
    private final float[] nextnInput; // concat(rms(embedding, enorm), rms(hidden, hnorm)) [2E]
    private final float[] nextnHidden; // the block's output, rms(x, shared_head_norm) [E]
    private final float[] nextnLogits;

    public GlmForward(GlmModel model, Backend backend, int maxBatch) {
        if (maxBatch <= 0) {
            throw new IllegalArgumentException("maxBatch must be positive, got " + maxBatch);
        }
        this.c = model.config();
        this.w = model.weights();
        this.backend = backend;
        this.maxBatch = maxBatch;
        this.vocab = model.vocabSize();
        int b = maxBatch;
        int e = c.embedding();
        int width = c.kvRowWidth();
        int k = c.expertsUsed();
        int widestFfn = Math.max(
                c.leadingDenseBlocks() > 0 ? c.denseFfn() : 0,
                Math.max(c.expertFfn(), c.expertFfn() * c.sharedExperts()));
        x = new float[b * e];
        h = new float[b * e];
        qa = new float[b * Math.max(1, c.qLoraRank())];
        q = new float[b * c.heads() * c.keyLengthMla()];
        kv = new float[b * width];
        kRow = new float[b * width];
        qFull = new float[b * c.heads() * width];
        oLatent = new float[b * c.heads() * c.kvLoraRank()];
        o = new float[b * c.heads() * c.valueLengthMla()];
        sub = new float[b * e];
        act = new float[b * Math.max(k, 1) * widestFfn];
        shared = new float[b * e];
        routerLogits = new float[b * c.experts()];
        probs = new float[b * c.experts()];
        selection = new float[b * c.experts()];
        chosen = new int[b * k];
        chosenWeights = new float[b * k];
        firstExpert = new int[b];
        unitWeights = new float[b];
        Arrays.fill(unitWeights, 1f);
        ropeCos = new float[b * c.ropeDims() / 2];
        ropeSin = new float[b * c.ropeDims() / 2];
        lastLogits = new float[vocab];
        rowCache = new KvCache[b];
        rowPosition = new int[b];
        runFirst = new int[b + 1];
        qRun = new float[c.heads() * width];
        oRun = new float[c.heads() * c.kvLoraRank()];
        boolean nextn = w.nextn() != null;
        hidden = nextn ? new float[b * e] : null;
        nextnInput = nextn ? new float[b * 2 * e] : null;
        nextnHidden = nextn ? new float[b * e] : null;
        nextnLogits = nextn ? new float[vocab] : null;
    }

    /** Sends every intermediate to {@code listener} (null: none, the normal case). */
    public void setListener(ForwardListener listener) {
        this.listener = listener;
    }

    public int maxBatch() {
        return maxBatch;
    }

    /**
     * Runs {@code tokens[from .. from+count)} at positions {@code cache.size() ..}, stores their rows in
     * the cache and advances it.
     *
     * @param allPositions false: the logits of the last token ({@code vocab} values, in a buffer reused by the
     *                     next call); true: the logits of every token ({@code count × vocab} values, a new array)
     */
    public float[] forward(KvCache cache, int[] tokens, int from, int count, boolean allPositions) {
        if (count <= 0) {
            throw new IllegalArgumentException("nothing to compute: " + count + " tokens");
        }
        if (count > cache.remaining()) {
            throw new InvalidInputException(count + " tokens do not fit in the context: " + cache.size() + " of "
                    + cache.capacity() + " positions are used");
        }
        float[] all = allPositions ? new float[count * vocab] : null;
        for (int done = 0; done < count; done += maxBatch) {
            int n = Math.min(maxBatch, count - done);
            boolean lastChunk = done + n == count;
            forwardChunk(cache, tokens, from + done, n);
            if (allPositions) {
                logits(0, n, all, done * vocab);
            } else if (lastChunk) {
                logits(n - 1, 1, lastLogits, 0);
            }
        }
        return allPositions ? all : lastLogits;
    }

    /**
     * One decode step of several sequences together: {@code tokens[i]} goes to {@code caches[i]} at that
     * cache's next position, and every cache advances by one. The weight matrices are read once for all
     * of them (what makes continuous batching pay); attention runs per sequence over its own cache.
     * Each row is computed as {@link #forward} computes a lone token.
     *
     * @return the logits of every sequence, {@code n × vocab} values (a new array)
     */
    public float[] decode(KvCache[] caches, int[] tokens, int n) {
        if (n <= 0 || n > maxBatch) {
            throw new IllegalArgumentException("a decode step takes 1.." + maxBatch + " sequences, got " + n);
        }
        for (int t = 0; t < n; t++) {
            if (caches[t].remaining() == 0) {
                throw new InvalidInputException(
                        "the context is full: all " + caches[t].capacity() + " positions are used");
            }
            for (int u = 0; u < t; u++) {
                if (caches[u] == caches[t]) {
                    throw new IllegalArgumentException("sequences " + u + " and " + t + " share a cache");
                }
            }
            rowCache[t] = caches[t];
            rowPosition[t] = caches[t].size();
        }
        rowsAlone(n);
        forwardRows(tokens, 0, n);
        float[] all = new float[n * vocab];
        logits(0, n, all, 0);
        return all;
    }

    /**
     * The prompts of several sequences as rows of one pass: {@code counts[r]} tokens of {@code tokens} (after those of
     * the runs before it) go into {@code caches[r]} (distinct) at the positions after what it holds, and every cache
     * advances by its count. Each run's rows are computed as {@link #forward} computes them in a chunk of their own
     * (attention per run over its own cache); the weight matrices are read once for all runs.
     *
     * @return the logits of each run's last token, {@code runs × vocab} values (a new array)
     */
    public float[] prompts(KvCache[] caches, int[] tokens, int[] counts, int runs) {
        int total = 0;
        for (int r = 0; r < runs; r++) {
            if (counts[r] <= 0) {
                throw new IllegalArgumentException("nothing to compute in run " + r + ": " + counts[r] + " tokens");
            }
            if (counts[r] > caches[r].remaining()) {
                throw new InvalidInputException(counts[r] + " tokens do not fit in the context: " + caches[r].size()
                        + " of " + caches[r].capacity() + " positions are used");
            }
            for (int u = 0; u < r; u++) {
                if (caches[u] == caches[r]) {
                    throw new IllegalArgumentException("runs " + u + " and " + r + " share a cache");
                }
            }
            total += counts[r];
        }
        if (runs <= 0 || total > maxBatch) {
            throw new IllegalArgumentException("a prompt pass takes 1.." + maxBatch + " rows, got " + total);
        }
        int row = 0;
        for (int r = 0; r < runs; r++) {
            runFirst[r] = row;
            for (int t = 0; t < counts[r]; t++, row++) {
                rowCache[row] = caches[r];
                rowPosition[row] = caches[r].size() + t;
            }
        }
        runFirst[runs] = row;
        this.runs = runs;
        forwardRows(tokens, 0, total);
        float[] last = new float[runs * vocab];
        for (int r = 0; r < runs; r++) {
            logits(runFirst[r + 1] - 1, 1, last, r * vocab);
        }
        return last;
    }

    /** Makes each of the {@code n} rows placed in {@link #rowCache} a run of its own. */
    private void rowsAlone(int n) {
        for (int t = 0; t <= n; t++) {
            runFirst[t] = t;
        }
        runs = n;
    }

    /** Makes the {@code n} rows placed in {@link #rowCache} one run (consecutive positions of one cache). */
    private void rowsTogether(int n) {
        runFirst[0] = 0;
        runFirst[1] = n;
        runs = 1;
    }

    /**
     * Runs {@code tokens[0 .. n)} at the positions after what {@code cache} holds, each row attending on its own as a
     * decode step's row does (the batched attention of a prompt chunk costs several times more for so few rows), and
     * gives back every row's logits ({@code n × vocab} values, a new array): a speculative step's verification, its
     * rows those of {@code n} decode steps.
     */
    public float[] verify(KvCache cache, int[] tokens, int n) {
        if (n <= 0 || n > maxBatch) {
            throw new IllegalArgumentException("a verification takes 1.." + maxBatch + " rows, got " + n);
        }
        if (n > cache.remaining()) {
            throw new InvalidInputException(n + " tokens do not fit in the context: " + cache.size() + " of "
                    + cache.capacity() + " positions are used");
        }
        for (int t = 0; t < n; t++) {
            rowCache[t] = cache;
            rowPosition[t] = cache.size() + t;
        }
        rowsAlone(n);
        forwardRows(tokens, 0, n);
        float[] all = new float[n * vocab];
        logits(0, n, all, 0);
        return all;
    }

    /** Whether the model has a NextN block, so that {@link #nextn} can run. */
    public boolean hasNextN() {
        return hidden != null;
    }

    /**
     * The trunk's output of row {@code row} of the last {@link #forward} chunk or {@link #decode} step: the final
     * hidden state normed by {@code output_norm}, which the NextN block takes for the position after it (E values into
     * {@code dst[dstOff ..]}). A {@link #forward} of more than {@code maxBatch} tokens keeps only its last chunk's.
     */
    public void hiddenState(int row, float[] dst, int dstOff) {
        int e = c.embedding();
        System.arraycopy(hidden, row * e, dst, dstOff, e);
    }

    /**
     * The NextN block (docs/MODEL.md §4b) for {@code n} rows: row t takes {@code tokens[t]} at {@code positions[t]} of
     * {@code caches[t]} and {@code hiddens[t·E ..]}, the trunk's output at the position before ({@link #hiddenState};
     * zeros where it is not known), writes its KV row into the cache's NextN layer (layer {@code layers}, which the
     * cache must have: {@link GlmModel#newCache(int, dev.glimmer.engine.kv.KvCacheType, boolean)}) and leaves the
     * block's own output (normed by the shared head norm: the hidden state a further draft takes) for
     * {@link #nextnHiddenState}. The caches' sizes are not changed: the trunk's rows of these positions make them count.
     *
     * @param logits whether to compute the last row's logits through the shared head (the draft)
     * @return the last row's logits ({@code vocab} values in a buffer the next call reuses), or null
     */
    public float[] nextn(KvCache[] caches, int[] positions, int[] tokens, float[] hiddens, int n, boolean logits) {
        GlmWeights.NextN m = w.nextn();
        if (m == null) {
            throw new IllegalStateException("the model has no NextN block");
        }
        if (n <= 0 || n > maxBatch) {
            throw new IllegalArgumentException("a NextN pass takes 1.." + maxBatch + " rows, got " + n);
        }
        int e = c.embedding();
        boolean oneSequence = true;
        for (int t = 0; t < n; t++) {
            if (caches[t].layers() <= c.layers()) {
                throw new IllegalArgumentException("the cache has no NextN layer");
            }
            rowCache[t] = caches[t];
            rowPosition[t] = positions[t];
            oneSequence &= caches[t] == caches[0] && positions[t] == positions[0] + t;
        }
        // x = eh_proj · concat(rms(embedding, enorm), rms(hidden, hnorm)): the embedding first, as llama.cpp's graph.
        for (int t = 0; t < n; t++) {
            backend.embed(m.embedding(), tokens[t], h, t * e);
            rmsNorm(h, t * e, e, m.enorm(), nextnInput, 2 * t * e);
            rmsNorm(hiddens, t * e, e, m.hnorm(), nextnInput, 2 * t * e + e);
        }
        int il = c.layers();
        emit("nextn_input", il, nextnInput, n, 2 * e);
        backend.matmul(m.ehProj(), nextnInput, 0, 2 * e, n, x, 0, e);
        emit("nextn_eh_proj", il, x, n, e);
        ropeAngles(n);
        if (oneSequence) {
            rowsTogether(n);
        } else {
            rowsAlone(n);
        }
        block(il, m.layer(), n);
        rmsNormRows(x, m.headNorm(), nextnHidden, n, e);
        emit("nextn_hidden", il, nextnHidden, n, e);
        if (!logits) {
            return null;
        }
        backend.matmul(m.head(), nextnHidden, (n - 1) * e, e, 1, nextnLogits, 0, vocab);
        emit("nextn_logits", il, nextnLogits, 1, vocab);
        return nextnLogits;
    }

    /** The NextN block's output of row {@code row} of the last {@link #nextn} pass (E values into {@code dst}). */
    public void nextnHiddenState(int row, float[] dst, int dstOff) {
        int e = c.embedding();
        System.arraycopy(nextnHidden, row * e, dst, dstOff, e);
    }

    /** One chunk of {@code n} tokens of one sequence, at the positions after what {@code cache} holds. */
    private void forwardChunk(KvCache cache, int[] tokens, int from, int n) {
        int start = cache.size();
        for (int t = 0; t < n; t++) {
            rowCache[t] = cache;
            rowPosition[t] = start + t;
        }
        rowsTogether(n);
        forwardRows(tokens, from, n);
    }

    /**
     * The layers for {@code n} rows placed by {@link #rowCache}, {@link #rowPosition} and {@link #runFirst}; leaves
     * the final hidden states in {@code x} and advances each run's cache by its rows.
     */
    private void forwardRows(int[] tokens, int from, int n) {
        int e = c.embedding();
        // 1. Token embeddings (no scaling).
        for (int t = 0; t < n; t++) {
            backend.embed(w.tokenEmbedding(), tokens[from + t], x, t * e);
        }
        ropeAngles(n);
        // 2. The layers.
        for (int il = 0; il < c.layers(); il++) {
            block(il, w.layers().get(il), n);
        }
        if (hidden != null) {
            rmsNormRows(x, w.outputNorm(), hidden, n, e);
        }
        for (int r = 0; r < runs; r++) {
            rowCache[runFirst[r]].advance(runFirst[r + 1] - runFirst[r]);
        }
    }

    /**
     * One transformer block on the rows in {@code x} (a trunk layer, or the NextN block's): attention over the KV rows
     * of cache layer {@code il}, then the dense FFN or the MoE, each added to the residual stream.
     */
    private void block(int il, GlmWeights.Layer layer, int n) {
        int e = c.embedding();
        rmsNormRows(x, layer.attnNorm(), h, n, e);
        emit("attn_norm", il, h, n, e);
        attention(il, layer, n);
        for (int i = 0; i < n * e; i++) {
            x[i] += sub[i];
        }
        emit("ffn_inp", il, x, n, e);
        rmsNormRows(x, layer.ffnNorm(), h, n, e);
        emit("ffn_norm", il, h, n, e);
        if (layer.dense() != null) {
            ffn(layer.dense(), h, n, sub, "ffn_swiglu", il);
        } else {
            moe(il, layer.moe(), n);
        }
        emit("ffn_out", il, sub, n, e);
        for (int i = 0; i < n * e; i++) {
            x[i] += sub[i];
        }
        emit("l_out", il, x, n, e);
    }

    /** MLA attention of the batch: writes the batch's latent rows to the cache, leaves the output in {@code sub}. */
    private void attention(int il, GlmWeights.Layer layer, int n) {
        int e = c.embedding();
        int heads = c.heads();
        int kmla = c.keyLengthMla();
        int nope = c.nopeDims();
        int rope = c.ropeDims();
        int kvr = c.kvLoraRank();
        int width = c.kvRowWidth();
        int vh = c.valueLengthMla();

        // Queries: q = W_q_b · rms(W_q_a · h), or W_q · h for models without q_lora.
        if (layer.qA() != null) {
            int qr = c.qLoraRank();
            backend.matmul(layer.qA(), h, 0, e, n, qa, 0, qr);
            emit("q_a", il, qa, n, qr);
            rmsNormRows(qa, layer.qANorm(), qa, n, qr);
            emit("q_a_norm", il, qa, n, qr);
            backend.matmul(layer.q(), qa, 0, qr, n, q, 0, heads * kmla);
        } else {
            backend.matmul(layer.q(), h, 0, e, n, q, 0, heads * kmla);
        }
        emit("q", il, q, n, heads * kmla);

        // The compressed KV: c = rms(kv[:kvr]), k_pe = RoPE(kv[kvr:]); the cache row is concat(c, k_pe).
        backend.matmul(layer.kvA(), h, 0, e, n, kv, 0, width);
        for (int t = 0; t < n; t++) {
            rmsNorm(kv, t * width, kvr, layer.kvANorm(), kRow, t * width);
            System.arraycopy(kv, t * width + kvr, kRow, t * width + kvr, rope);
            rotate(kRow, t * width + kvr, t);
        }
        emitStrided("kv_cmpr", il, kRow, n, width, 0, kvr);
        emitStrided("k_pe", il, kRow, n, width, kvr, rope);
        emit("Kcur", il, kRow, n, width);
        for (int t = 0; t < n; t++) {
            rowCache[t].write(il, rowPosition[t], kRow, t * width);
        }

        // Absorbed queries: Q[h] = concat(W_k_b[h] · q_nope[h], RoPE(q_pe[h])), rows as wide as the cache's.
        backend.matmulHeads(layer.kB(), q, 0, kmla, heads * kmla, n, qFull, 0, width, heads * width);
        for (int hd = 0; hd < heads; hd++) {
            for (int t = 0; t < n; t++) {
                int dst = (t * heads + hd) * width + kvr;
                System.arraycopy(q, (t * heads + hd) * kmla + nope, qFull, dst, rope);
                rotate(qFull, dst, t);
            }
        }
        emitStrided("q_nope_absorbed", il, qFull, n * heads, width, 0, kvr);
        emitStrided("q_pe", il, qFull, n * heads, width, kvr, rope);
        emit("Qcur", il, qFull, n, heads * width);

        // Softmax(Q·K · kq_scale) over the causal window, weighted sum of the latent values.
        if (runs == 1) {
            backend.attention(rowCache[0], il, qFull, n, rowPosition[0], heads, c.kqScale(), kvr, oLatent);
        } else {
            // Each run attends over its own sequence's cache.
            for (int r = 0; r < runs; r++) {
                int first = runFirst[r];
                int rows = runFirst[r + 1] - first;
                if (qRun.length < rows * heads * width) {
                    qRun = new float[rows * heads * width];
                    oRun = new float[rows * heads * kvr];
                }
                System.arraycopy(qFull, first * heads * width, qRun, 0, rows * heads * width);
                backend.attention(rowCache[first], il, qRun, rows, rowPosition[first], heads, c.kqScale(), kvr, oRun);
                System.arraycopy(oRun, 0, oLatent, first * heads * kvr, rows * heads * kvr);
            }
        }
        emit("kqv_latent", il, oLatent, n, heads * kvr);

        // Back from the latent space per head, then the output projection.
        backend.matmulHeads(layer.vB(), oLatent, 0, kvr, heads * kvr, n, o, 0, vh, heads * vh);
        emit("kqv_out", il, o, n, heads * vh);
        backend.matmul(layer.attnOutput(), o, 0, heads * vh, n, sub, 0, e);
    }

    /**
     * {@code out = down · (silu(gate · in) ⊙ (up · in))} for {@code n} rows of {@code in} (one "expert" of weight 1);
     * the SwiGLU rows are reported as {@code swigluName} when that is not null.
     */
    private void ffn(GlmWeights.Ffn f, float[] in, int n, float[] out, String swigluName, int il) {
        single[0] = f;
        backend.expertFfn(single, firstExpert, unitWeights, 1, in, n, act, out);
        if (swigluName != null) {
            emit(swigluName, il, act, n, f.gate().rows());
        }
    }

    /** The MoE block of layer {@code il} on the normed rows in {@code h}; output in {@code sub}. */
    private void moe(int il, GlmWeights.Moe moe, int n) {
        int e = c.embedding();
        int experts = c.experts();
        int k = c.expertsUsed();

        // Router: probabilities per expert; the selection bias only influences which experts are chosen.
        backend.matmul(moe.router(), h, 0, e, n, routerLogits, 0, experts);
        emit("ffn_moe_logits", il, routerLogits, n, experts);
        for (int t = 0; t < n; t++) {
            int row = t * experts;
            switch (c.gating()) {
                case SIGMOID -> {
                    for (int j = 0; j < experts; j++) {
                        probs[row + j] = sigmoid(routerLogits[row + j]);
                    }
                }
                case SOFTMAX -> softmax(routerLogits, row, experts, probs);
            }
            for (int j = 0; j < experts; j++) {
                selection[row + j] =
                        moe.selectionBias() == null ? probs[row + j] : probs[row + j] + moe.selectionBias()[j];
            }
        }
        emit("ffn_moe_probs", il, probs, n, experts);
        emit(moe.selectionBias() != null ? "ffn_moe_probs_biased" : "ffn_moe_selection", il, selection, n, experts);
        for (int t = 0; t < n; t++) {
            topK(selection, t * experts, experts, chosen, t * k, k);
        }
        if (listener != null) {
            float[] ids = new float[n * k];
            for (int i = 0; i < n * k; i++) {
                ids[i] = chosen[i];
            }
            listener.tensor("ffn_moe_topk", il, n, k, ids);
        }

        // Weights of the chosen experts: the unbiased probabilities, normalized, scaled.
        for (int t = 0; t < n; t++) {
            for (int s = 0; s < k; s++) {
                chosenWeights[t * k + s] = probs[t * experts + chosen[t * k + s]];
            }
        }
        emit("ffn_moe_weights", il, chosenWeights, n, k);
        if (c.expertWeightsNorm()) {
            for (int t = 0; t < n; t++) {
                double sum = 0;
                for (int s = 0; s < k; s++) {
                    sum += chosenWeights[t * k + s];
                }
                float norm = Math.max((float) sum, MIN_WEIGHT_SUM);
                for (int s = 0; s < k; s++) {
                    chosenWeights[t * k + s] /= norm;
                }
            }
            emit("ffn_moe_weights_norm", il, chosenWeights, n, k);
        }
        for (int i = 0; i < n * k; i++) {
            chosenWeights[i] *= c.expertWeightsScale();
        }
        emit("ffn_moe_weights_scaled", il, chosenWeights, n, k);

        // The selected experts of every token, weighted and summed in slot order (as llama.cpp adds them).
        backend.expertFfn(moe.experts(), chosen, chosenWeights, k, h, n, act, sub);
        if (listener != null) {
            emitExpertRows(il, moe.experts()[0].gate().rows(), n, k);
        }
        emit("ffn_moe_out", il, sub, n, e);
        if (moe.shared() != null) {
            ffn(moe.shared(), h, n, shared, "ffn_shexp_swiglu", il);
            emit("ffn_shexp", il, shared, n, e);
            for (int i = 0; i < n * e; i++) {
                sub[i] += shared[i];
            }
        }
    }

    /** 3. The output head for {@code count} rows from {@code first} of the final hidden states. */
    private void logits(int first, int count, float[] out, int outOff) {
        int e = c.embedding();
        for (int t = 0; t < count; t++) {
            rmsNorm(x, (first + t) * e, e, w.outputNorm(), h, t * e);
        }
        emit("result_norm", -1, h, count, e);
        backend.matmul(w.output(), h, 0, e, count, out, outOff, vocab);
        if (listener != null) {
            listener.tensor("result_output", -1, count, vocab, Arrays.copyOfRange(out, outOff, outOff + count * vocab));
        }
    }

    // ---- the scalar math, as ggml computes it ----

    /** RMSNorm of {@code n} rows of {@code width} values: {@code x / sqrt(mean(x²) + eps) * weight}. */
    private void rmsNormRows(float[] src, float[] weight, float[] dst, int n, int width) {
        for (int t = 0; t < n; t++) {
            rmsNorm(src, t * width, width, weight, dst, t * width);
        }
    }

    /** ggml sums the squares (each rounded to float) in double, takes the mean as float, and scales before the weight. */
    private void rmsNorm(float[] src, int off, int width, float[] weight, float[] dst, int dstOff) {
        double sum = 0;
        for (int i = 0; i < width; i++) {
            float v = src[off + i];
            sum += v * v;
        }
        float mean = (float) (sum / width);
        float scale = 1.0f / (float) Math.sqrt(mean + c.rmsEps());
        for (int i = 0; i < width; i++) {
            dst[dstOff + i] = src[off + i] * scale * weight[i];
        }
    }

    /**
     * RoPE angles of the batch (type NORM, no scaling): for pair i of position p, θ = p · base^(-2i/dims),
     * computed as ggml does, by repeated float multiplication.
     */
    private void ropeAngles(int n) {
        int pairs = c.ropeDims() / 2;
        float thetaScale = (float) Math.pow(c.ropeBase(), -2.0f / c.ropeDims());
        for (int t = 0; t < n; t++) {
            float theta = rowPosition[t];
            for (int i = 0; i < pairs; i++) {
                ropeCos[t * pairs + i] = (float) Math.cos(theta);
                ropeSin[t * pairs + i] = (float) Math.sin(theta);
                theta *= thetaScale;
            }
        }
    }

    /** Rotates the adjacent pairs {@code (v[2i], v[2i+1])} at {@code off} by token t's angles. */
    private void rotate(float[] v, int off, int t) {
        int pairs = c.ropeDims() / 2;
        for (int i = 0; i < pairs; i++) {
            float cos = ropeCos[t * pairs + i];
            float sin = ropeSin[t * pairs + i];
            float x0 = v[off + 2 * i];
            float x1 = v[off + 2 * i + 1];
            v[off + 2 * i] = x0 * cos - x1 * sin;
            v[off + 2 * i + 1] = x0 * sin + x1 * cos;
        }
    }

    private static float sigmoid(float v) {
        return 1.0f / (1.0f + (float) Math.exp(-v));
    }

    // CpuAttention's softmax phase computes the same per head, written inline there so that the heads are
    // shared among the worker threads.
    /** ggml's softmax: exponentials of the max-shifted values in float, their sum in double. */
    private static void softmax(float[] src, int off, int n, float[] dst) {
        float max = Float.NEGATIVE_INFINITY;
        for (int i = 0; i < n; i++) {
            max = Math.max(max, src[off + i]);
        }
        double sum = 0;
        for (int i = 0; i < n; i++) {
            float v = (float) Math.exp(src[off + i] - max);
            dst[off + i] = v;
            sum += v;
        }
        float inv = (float) (1.0 / sum);
        for (int i = 0; i < n; i++) {
            dst[off + i] *= inv;
        }
    }

    /** The {@code k} largest of {@code values[off .. off+n)}, largest first (on ties the lower index first). */
    private static void topK(float[] values, int off, int n, int[] out, int outOff, int k) {
        for (int s = 0; s < k; s++) {
            int best = -1;
            for (int j = 0; j < n; j++) {
                if (isChosen(out, outOff, s, j)) {
                    continue;
                }
                if (best < 0 || values[off + j] > values[off + best]) {
                    best = j;
                }
            }
            out[outOff + s] = best;
        }
    }

    private static boolean isChosen(int[] out, int outOff, int count, int j) {
        for (int s = 0; s < count; s++) {
            if (out[outOff + s] == j) {
                return true;
            }
        }
        return false;
    }

    /** Each selected expert's SwiGLU rows, in token order, as {@code ffn_moe_swiglu_<expert>}. */
    private void emitExpertRows(int il, int width, int n, int k) {
        for (int expert = 0; expert < c.experts(); expert++) {
            int m = 0;
            float[] rows = new float[n * k * width];
            for (int slot = 0; slot < n * k; slot++) {
                if (chosen[slot] == expert) {
                    System.arraycopy(act, slot * width, rows, m++ * width, width);
                }
            }
            if (m > 0) {
                listener.tensor("ffn_moe_swiglu_" + expert, il, m, width, rows);
            }
        }
    }

    private void emit(String name, int layer, float[] data, int n, int width) {
        if (listener != null) {
            listener.tensor(name, layer, n, width, data);
        }
    }

    /** Emits values {@code [from, from+count)} of each of {@code rows} rows of {@code stride} values. */
    private void emitStrided(String name, int layer, float[] data, int rows, int stride, int from, int count) {
        if (listener != null) {
            float[] copy = new float[rows * count];
            for (int r = 0; r < rows; r++) {
                System.arraycopy(data, r * stride + from, copy, r * count, count);
            }
            listener.tensor(name, layer, rows, count, copy);
        }
    }
}
