package dev.glimmer.engine.backend.cpu;

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
 */
public final class CpuSequencePool implements SequencePool {

    private final GlmModel model;
    private final Backend backend;
    private final GlmForward forward;
    private final KvCacheType cacheType;
    private final SequenceSlots slots;
    /** Each open slot's cache; its size follows the slot's position (a truncation takes effect at the next run). */
    private final KvCache[] caches;

    /**
     * @param promptBatch tokens computed together at most: of a prompt, or rows of a decode step (more run in turns);
     *                    the forward pass's scratch is sized for them
     */
    public CpuSequencePool(
            GlmModel model, Backend backend, int slots, int capacity, KvCacheType cacheType, int promptBatch) {
        this.model = model;
        this.backend = backend;
        this.cacheType = cacheType;
        this.slots = new SequenceSlots(slots, capacity, this::free);
        this.caches = new KvCache[slots];
        this.forward = new GlmForward(model, backend, promptBatch);
    }

    /** The backend the forward pass computes with (its profile and kernels, for {@code bench}). */
    public Backend backend() {
        return backend;
    }

    @Override
    public Sequence open() {
        SequenceSlots.Slot slot = slots.open();
        try {
            caches[slot.index()] = model.newCache(slots.capacity(), cacheType);
        } catch (RuntimeException | OutOfMemoryError e) {
            slot.close();
            throw e;
        }
        return slot;
    }

    private void free(int index) {
        KvCache cache = caches[index];
        caches[index] = null;
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
        return KvCache.bytes(model.config().layers(), model.config().kvRowWidth(), slots.capacity(), cacheType);
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
        return KvCache.bytes(model.config().layers(), model.config().kvRowWidth(), 1, cacheType);
    }

    /** A host cache of the type's values, per layer then position. */
    @Override
    public String kvLayout() {
        return "cpu-" + cacheType.name().toLowerCase(Locale.ROOT) + "-"
                + model.config().layers() + "x" + model.config().kvRowWidth();
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
    }

    /** The last token's logits, in a buffer the next run reuses. */
    @Override
    public Next prompt(Sequence sequence, int[] tokens, int from, int count, Readout readout) {
        SequenceSlots.Slot slot = slots.own(sequence);
        float[] logits = forward.forward(cache(slot), tokens, from, count, false);
        slot.advance(count);
        return withGreedy(logits);
    }

    @Override
    public float[] promptLogits(Sequence sequence, int[] tokens, int from, int count) {
        SequenceSlots.Slot slot = slots.own(sequence);
        float[] logits = forward.forward(cache(slot), tokens, from, count, true);
        slot.advance(count);
        return logits;
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
            float[] logits = forward.decode(kv, Arrays.copyOfRange(tokens, first, first + n), n);
            for (int i = 0; i < n; i++) {
                own.get(first + i).advance(1);
                next[first + i] = withGreedy(Arrays.copyOfRange(logits, i * vocab, (i + 1) * vocab));
            }
        }
        return () -> next;
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
    }

    /** The sequences' caches are freed as they close; the worker threads are shared by every CPU backend. */
    @Override
    public void close() {}
}
