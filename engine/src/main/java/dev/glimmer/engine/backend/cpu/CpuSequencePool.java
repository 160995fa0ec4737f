package dev.glimmer.engine.backend.cpu;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.SequenceSlots;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.Backend;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.sampling.Sampler;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;

/**
 * The CPU's {@link SequencePool}: the engine's forward pass ({@link GlmForward}) over a host {@link KvCache} per open
 * sequence, made when it opens and freed when it closes. A prompt runs in batches of the forward pass; a decode step of
 * several sequences is one batched pass (the weights are read once for all of them: what makes continuous batching
 * pay on the CPU), each row computed as a lone token would be. Every row gives back its logits, whatever its readout
 * asks (the pass computes them on the host anyway), and their first maximum as its greedy token.
 *
 * <p>A pool made with drafts ({@code maxDrafts > 0}, a model with a NextN block) keeps every sequence ready to draft:
 * its cache has one more layer, the NextN block's KV rows, which every run fills for the positions it computes (row p
 * from the token at p and the trunk's output at p - 1), and it keeps the trunk's outputs of the last run's rows
 * ({@link TrunkOutputs}).
 */
public final class CpuSequencePool implements SequencePool {

    private final GlmModel model;
    private final Backend backend;
    private final GlmForward forward;
    private final KvCacheType cacheType;
    private final SequenceSlots slots;
    /** Each open slot's cache; its size follows the slot's position (a truncation takes effect at the next run). */
    private final KvCache[] caches;
    /** Tokens a speculative step drafts at most; 0: the pool does not draft. */
    private final int maxDrafts;
    /** Each open slot's last trunk outputs, for the NextN block; null when the pool does not draft. */
    private final TrunkOutputs[] outputs;
    /** The NextN block's input rows (the trunk's outputs at the positions before), scratch of maxBatch rows. */
    private final float[] nextnHiddens;

    /**
     * @param promptBatch tokens computed together at most: of a prompt, or rows of a decode step (more run in turns);
     *                    the forward pass's scratch is sized for them
     */
    public CpuSequencePool(
            GlmModel model, Backend backend, int slots, int capacity, KvCacheType cacheType, int promptBatch) {
        this(model, backend, slots, capacity, cacheType, promptBatch, 0);
    }

    /**
     * @param maxDrafts tokens a {@link #speculate} step drafts at most (0: none); more than 0 needs a model with a
     *                  NextN block
     */
    public CpuSequencePool(
            GlmModel model,
            Backend backend,
            int slots,
            int capacity,
            KvCacheType cacheType,
            int promptBatch,
            int maxDrafts) {
        if (maxDrafts < 0 || maxDrafts > 0 && model.weights().nextn() == null) {
            throw new IllegalArgumentException(maxDrafts + " drafts: the model has "
                    + (model.weights().nextn() == null ? "no" : "a") + " NextN block");
        }
        this.model = model;
        this.backend = backend;
        this.cacheType = cacheType;
        this.slots = new SequenceSlots(slots, capacity, this::free);
        this.caches = new KvCache[slots];
        // A speculative step runs the token and its drafts as rows of one pass.
        this.forward = new GlmForward(model, backend, Math.max(promptBatch, maxDrafts + 1));
        this.maxDrafts = maxDrafts;
        this.outputs = maxDrafts > 0 ? new TrunkOutputs[slots] : null;
        this.nextnHiddens =
                maxDrafts > 0 ? new float[forward.maxBatch() * model.config().embedding()] : null;
    }

    private boolean drafting() {
        return maxDrafts > 0;
    }

    @Override
    public int maxDrafts() {
        return maxDrafts;
    }

    /** The backend the forward pass computes with (its profile and kernels, for {@code bench}). */
    public Backend backend() {
        return backend;
    }

    @Override
    public Sequence open() {
        SequenceSlots.Slot slot = slots.open();
        try {
            caches[slot.index()] = model.newCache(slots.capacity(), cacheType, drafting());
            if (drafting()) {
                outputs[slot.index()] =
                        new TrunkOutputs(maxDrafts + 1, model.config().embedding());
            }
        } catch (RuntimeException | OutOfMemoryError e) {
            slot.close();
            throw e;
        }
        return slot;
    }

    private void free(int index) {
        KvCache cache = caches[index];
        caches[index] = null;
        if (outputs != null) {
            outputs[index] = null;
        }
        if (cache != null) {
            cache.close();
        }
    }

    /** The cache of {@code slot}, cut to its position. */
    private KvCache cache(SequenceSlots.Slot slot) {
        KvCache cache = caches[slot.index()];
        if (cache.size() != slot.position()) {
            cache.truncate(slot.position());
        }
        return cache;
    }

    @Override
    public int slots() {
        return slots.size();
    }

    @Override
    public int capacity() {
        return slots.capacity();
    }

    @Override
    public long bytesPerSequence() {
        return KvCache.bytes(model.cacheLayers(drafting()), model.config().kvRowWidth(), slots.capacity(), cacheType);
    }

    @Override
    public int inUse() {
        return slots.inUse();
    }

    /** The caches of the open sequences. */
    @Override
    public long bytes() {
        return inUse() * bytesPerSequence();
    }

    @Override
    public long bytesPerPosition() {
        return KvCache.bytes(model.cacheLayers(drafting()), model.config().kvRowWidth(), 1, cacheType);
    }

    /** A host cache of the type's values, per layer then position. */
    @Override
    public String kvLayout() {
        return "cpu-" + cacheType.name().toLowerCase(Locale.ROOT) + "-" + model.cacheLayers(drafting()) + "x"
                + model.config().kvRowWidth();
    }

    @Override
    public void exportPrefix(Sequence sequence, int n, MemorySegment into) {
        SequenceSlots.Slot slot = slots.own(sequence);
        if (n > slot.position()) {
            throw new IllegalArgumentException("the sequence holds " + slot.position() + " positions, not " + n);
        }
        cache(slot).exportRows(n, into);
    }

    @Override
    public void importPrefix(Sequence sequence, MemorySegment from, int n) {
        SequenceSlots.Slot slot = slots.own(sequence);
        slot.truncate(0);
        KvCache cache = cache(slot);
        cache.importRows(from, n);
        slot.advance(n);
        if (drafting()) {
            outputs[slot.index()].clear(); // the trunk's output at n - 1 is not among the rows: the next is a guess
        }
    }

    /** The last token's logits, in a buffer the next run reuses. */
    @Override
    public Next prompt(Sequence sequence, int[] tokens, int from, int count, Readout readout) {
        return withGreedy(run(slots.own(sequence), tokens, from, count, false));
    }

    /**
     * One pass of {@link GlmForward#prompts} when the rows fit in a batch and the pool does not draft (drafting keeps
     * the NextN rows of each sequence's chunk); one prompt after another otherwise.
     */
    @Override
    public Next[] prompts(List<Sequence> sequences, List<int[]> tokens, int[] from, int[] counts, Readout[] readouts) {
        int runs = sequences.size();
        int total = Arrays.stream(counts, 0, runs).sum();
        if (drafting() || runs == 1 || total > forward.maxBatch()) {
            return SequencePool.super.prompts(sequences, tokens, from, counts, readouts);
        }
        List<SequenceSlots.Slot> own = slots.own(sequences);
        KvCache[] kv = new KvCache[runs];
        int[] rows = new int[total];
        for (int i = 0, row = 0; i < runs; row += counts[i], i++) {
            kv[i] = cache(own.get(i));
            System.arraycopy(tokens.get(i), from[i], rows, row, counts[i]);
        }
        float[] logits = forward.prompts(kv, rows, counts, runs);
        int vocab = model.vocabSize();
        Next[] next = new Next[runs];
        for (int i = 0; i < runs; i++) {
            own.get(i).advance(counts[i]);
            next[i] = withGreedy(Arrays.copyOfRange(logits, i * vocab, (i + 1) * vocab));
        }
        return next;
    }

    @Override
    public float[] promptLogits(Sequence sequence, int[] tokens, int from, int count) {
        return run(slots.own(sequence), tokens, from, count, true);
    }

    /**
     * Runs tokens into a sequence as {@link GlmForward#forward} does; a drafting pool runs them in chunks of the
     * forward pass's batch, each followed by the NextN block's rows of its positions.
     */
    private float[] run(SequenceSlots.Slot slot, int[] tokens, int from, int count, boolean allPositions) {
        KvCache cache = cache(slot);
        if (!drafting()) {
            float[] logits = forward.forward(cache, tokens, from, count, allPositions);
            slot.advance(count);
            return logits;
        }
        int vocab = model.vocabSize();
        float[] all = allPositions ? new float[count * vocab] : null;
        float[] last = null;
        for (int done = 0; done < count; done += forward.maxBatch()) {
            int n = Math.min(forward.maxBatch(), count - done);
            int start = slot.position();
            float[] logits = forward.forward(cache, tokens, from + done, n, allPositions);
            if (allPositions) {
                System.arraycopy(logits, 0, all, done * vocab, n * vocab);
            } else {
                last = logits;
            }
            nextnRows(slot, start, tokens, from + done, n);
            slot.advance(n);
        }
        return allPositions ? all : last;
    }

    /**
     * The NextN block's rows of positions {@code start .. start+n-1} of one sequence, just computed by the trunk from
     * {@code tokens[from ..]}: row p takes the token at p and the trunk's output at p - 1 (the run's row before, or the
     * one kept from the run before it). Keeps the run's last output for the next.
     */
    private void nextnRows(SequenceSlots.Slot slot, int start, int[] tokens, int from, int n) {
        int e = model.config().embedding();
        TrunkOutputs kept = outputs[slot.index()];
        kept.get(start - 1, nextnHiddens, 0);
        for (int t = 1; t < n; t++) {
            forward.hiddenState(t - 1, nextnHiddens, t * e);
        }
        KvCache cache = caches[slot.index()];
        KvCache[] rowCaches = new KvCache[n];
        int[] positions = new int[n];
        for (int t = 0; t < n; t++) {
            rowCaches[t] = cache;
            positions[t] = start + t;
        }
        forward.nextn(rowCaches, positions, Arrays.copyOfRange(tokens, from, from + n), nextnHiddens, n, false);
        kept.keep(forward, start, n);
    }

    /** The step is done when this returns (more rows than a batch: in turns of one); every row gets its logits. */
    @Override
    public Launched launch(List<Sequence> sequences, int[] tokens, Readout[] readouts) {
        List<SequenceSlots.Slot> own = slots.own(sequences);
        int vocab = model.vocabSize();
        Next[] next = new Next[own.size()];
        for (int first = 0; first < next.length; first += forward.maxBatch()) {
            int n = Math.min(forward.maxBatch(), next.length - first);
            KvCache[] kv = new KvCache[n];
            for (int i = 0; i < n; i++) {
                kv[i] = cache(own.get(first + i));
            }
            int[] rowTokens = Arrays.copyOfRange(tokens, first, first + n);
            int[] positions = new int[n];
            for (int i = 0; i < n; i++) {
                positions[i] = own.get(first + i).position();
            }
            float[] logits = forward.decode(kv, rowTokens, n);
            if (drafting()) {
                // Each sequence's NextN row of this position, from its trunk output of the position before.
                int e = model.config().embedding();
                for (int i = 0; i < n; i++) {
                    outputs[own.get(first + i).index()].get(positions[i] - 1, nextnHiddens, i * e);
                }
                forward.nextn(kv, positions, rowTokens, nextnHiddens, n, false);
                for (int i = 0; i < n; i++) {
                    outputs[own.get(first + i).index()].keep(forward, i, positions[i], 1);
                }
            }
            for (int i = 0; i < n; i++) {
                own.get(first + i).advance(1);
                next[first + i] = withGreedy(Arrays.copyOfRange(logits, i * vocab, (i + 1) * vocab));
            }
        }
        return () -> next;
    }

    /**
     * Drafts with the NextN block (one pass per draft: the first from the trunk's output at the position before
     * {@code token}, each further one from the block's own output), runs the token and the drafts through the trunk as
     * rows of one sequence, then the NextN block's rows of the drafts' positions from the trunk's outputs (they stand
     * where the drafts are accepted; the rest is overwritten later).
     */
    @Override
    public Speculation speculate(Sequence sequence, int token, int drafts, Readout readout, DraftFilter filter) {
        if (!drafting()) {
            throw new UnsupportedOperationException("this pool does not draft");
        }
        SequenceSlots.Slot slot = slots.own(sequence);
        int start = slot.position();
        if (start >= slot.capacity()) {
            throw new InvalidInputException("the context is full: all " + slot.capacity() + " positions are used");
        }
        int k = Math.max(0, Math.min(Math.min(drafts, maxDrafts), slot.capacity() - start - 1));
        KvCache cache = cache(slot);
        KvCache[] one = {cache};
        int e = model.config().embedding();
        // Draft: the NextN row of the token's position (final: its inputs are known), then a row per further draft
        // from the block's own output (provisional: redone below from the trunk's outputs).
        float[] hiddenIn = new float[e];
        outputs[slot.index()].get(start - 1, hiddenIn, 0);
        int[] drafted = new int[k];
        int input = token;
        for (int i = 0; i < Math.max(k, 1); i++) {
            float[] draftLogits = forward.nextn(one, new int[] {start + i}, new int[] {input}, hiddenIn, 1, k > 0);
            if (k == 0) {
                break;
            }
            drafted[i] = Sampler.argmax(draftLogits, draftLogits.length);
            forward.nextnHiddenState(0, hiddenIn, 0);
            input = drafted[i];
        }
        filter.replace(start + 1, drafted);

        // Verify: the token and the drafts through the trunk, every row's logits.
        int[] rowTokens = new int[k + 1];
        rowTokens[0] = token;
        System.arraycopy(drafted, 0, rowTokens, 1, k);
        float[] logits = forward.verify(cache, rowTokens, k + 1);
        TrunkOutputs kept = outputs[slot.index()];
        if (k > 0) {
            int[] positions = new int[k];
            for (int i = 0; i < k; i++) {
                positions[i] = start + 1 + i;
                forward.hiddenState(i, nextnHiddens, i * e);
            }
            KvCache[] rowCaches = new KvCache[k];
            Arrays.fill(rowCaches, cache);
            forward.nextn(rowCaches, positions, drafted, nextnHiddens, k, false);
        }
        kept.keep(forward, start, k + 1);
        slot.advance(k + 1);
        int vocab = model.vocabSize();
        Next[] rows = new Next[k + 1];
        for (int i = 0; i <= k; i++) {
            rows[i] = withGreedy(Arrays.copyOfRange(logits, i * vocab, (i + 1) * vocab));
        }
        return new Speculation(drafted, rows);
    }

    /**
     * The trunk's outputs (the final hidden state normed by {@code output_norm}) of one sequence's last run, by
     * position: the NextN block's input at the position after each. Up to {@code capacity} rows, the last of a run; a
     * position not among them reads as zeros (after an import of KV rows, or a truncation to before the run), which
     * only makes that one NextN row, and so a draft, worse: verification keeps the output exact.
     */
    private static final class TrunkOutputs {
        private final float[] rows;
        private final int width;
        private final int capacity;
        private int first;
        private int count;

        TrunkOutputs(int capacity, int width) {
            this.rows = new float[capacity * width];
            this.width = width;
            this.capacity = capacity;
        }

        /** The output at {@code position} into {@code dst[off ..]}, or zeros when it is not kept. */
        void get(int position, float[] dst, int off) {
            if (position >= first && position < first + count) {
                System.arraycopy(rows, (position - first) * width, dst, off, width);
            } else {
                Arrays.fill(dst, off, off + width, 0f);
            }
        }

        /** Keeps the last rows of a run of {@code n} rows at positions {@code start ..} (the pass's rows 0 ..). */
        void keep(GlmForward forward, int start, int n) {
            keep(forward, Math.max(0, n - capacity), start + Math.max(0, n - capacity), Math.min(n, capacity));
        }

        /** Keeps rows {@code row .. row+n-1} of the last pass as the outputs at positions {@code position ..}. */
        void keep(GlmForward forward, int row, int position, int n) {
            for (int i = 0; i < n; i++) {
                forward.hiddenState(row + i, rows, i * width);
            }
            first = position;
            count = n;
        }

        void clear() {
            count = 0;
        }
    }

    private static Next withGreedy(float[] logits) {
        return new Next(logits, Sampler.argmax(logits, logits.length));
    }

    /**
     * Puts {@code depth} positions of random KV rows into {@code sequence} after truncating it to none: attention over
     * them costs what it costs over computed rows, so {@code bench} measures decode after a long context without
     * computing one.
     */
    public void fillRandom(Sequence sequence, int depth, Random random) {
        SequenceSlots.Slot slot = slots.own(sequence);
        slot.truncate(0);
        KvCache cache = cache(slot);
        float[] row = new float[cache.rowWidth()];
        for (int p = 0; p < depth; p++) {
            for (int layer = 0; layer < cache.layers(); layer++) {
                for (int i = 0; i < row.length; i++) {
                    row[i] = (float) random.nextGaussian();
                }
                cache.write(layer, p, row, 0);
            }
        }
        cache.advance(depth);
        slot.advance(depth);
        if (drafting()) {
            outputs[slot.index()].clear();
        }
    }

    /** The sequences' caches are freed as they close; the worker threads are shared by every CPU backend. */
    @Override
    public void close() {}
}
