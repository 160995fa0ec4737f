package dev.glimmer.server.inference;

import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;

import java.util.Arrays;
import java.util.List;

/**
 * The CPU backend's steps: the engine's forward pass over host {@link KvCache}s, with every sequence of
 * a decode step in one batched pass (the weights are read once for all of them: what makes continuous
 * batching pay on the CPU).
 */
final class CpuStepRunner implements StepRunner<CpuStepRunner.HostCache> {

    /** A host KV cache as a {@link SequenceCache}. */
    record HostCache(KvCache kv) implements SequenceCache {
        @Override
        public int size() {
            return kv.size();
        }

        @Override
        public int capacity() {
            return kv.capacity();
        }

        @Override
        public void truncate(int n) {
            kv.truncate(n);
        }

        @Override
        public void close() {
            kv.close();
        }
    }

    private final GlmModel model;
    private final GlmForward forward;
    private final int ctx;
    private final KvCacheType cacheType;

    /**
     * @param threads  threads of the CPU backend
     * @param maxBatch the most tokens of one step: at least the prompt chunk and the parallel sequences
     */
    CpuStepRunner(GlmModel model, int threads, int ctx, KvCacheType cacheType, int maxBatch) {
        this.model = model;
        model.file().populate(); // the first requests then take no page faults
        this.forward = new GlmForward(model, new CpuBackend(threads), maxBatch);
        this.ctx = ctx;
        this.cacheType = cacheType;
    }

    @Override
    public BackendKind backend() {
        return BackendKind.CPU;
    }

    @Override
    public HostCache newCache() {
        return new HostCache(model.newCache(ctx, cacheType));
    }

    @Override
    public long cacheBytes() {
        return KvCache.bytes(model.config().layers(), model.config().kvRowWidth(), ctx, cacheType);
    }

    @Override
    public float[] prefill(HostCache cache, int[] tokens, int from, int count) {
        return forward.forward(cache.kv(), tokens, from, count, false);
    }

    /** Every sequence gets its logits: the batched pass computes them on the host anyway, before this returns. */
    @Override
    public DecodeStep decode(List<HostCache> caches, int[] tokens, SequencePool.Readout[] readouts) {
        int n = caches.size();
        KvCache[] kv = new KvCache[n];
        for (int i = 0; i < n; i++) {
            kv[i] = caches.get(i).kv();
        }
        float[] logits = forward.decode(kv, tokens, n);
        int vocab = model.vocabSize();
        NextToken[] next = new NextToken[n];
        for (int i = 0; i < n; i++) {
            next[i] = NextToken.of(Arrays.copyOfRange(logits, i * vocab, (i + 1) * vocab));
        }
        return () -> next;
    }

    /** The worker threads are shared by every CPU backend of the process; nothing to free. */
    @Override
    public void close() {
    }
}
