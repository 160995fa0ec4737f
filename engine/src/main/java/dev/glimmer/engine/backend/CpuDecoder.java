package dev.glimmer.engine.backend;

import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.Backend;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;

/** A sequence on the CPU: the engine's forward pass with the {@link CpuBackend} and its own KV cache. */
public final class CpuDecoder implements TokenDecoder {

    private final GlmForward forward;
    private final KvCache cache;

    public CpuDecoder(GlmModel model, int capacity, KvCacheType cacheType) {
        this(model, capacity, cacheType, new CpuBackend());
    }

    CpuDecoder(GlmModel model, int capacity, KvCacheType cacheType, Backend backend) {
        this.cache = model.newCache(capacity, cacheType);
        this.forward = new GlmForward(model, backend, GlmForward.DEFAULT_BATCH);
    }

    /** The forward pass and cache, for callers (the generator) that drive them directly. */
    public GlmForward forwardPass() {
        return forward;
    }

    public KvCache cache() {
        return cache;
    }

    @Override
    public float[] forward(int[] tokens, int from, int count) {
        return forward.forward(cache, tokens, from, count, false);
    }

    @Override
    public int position() {
        return cache.size();
    }

    @Override
    public int capacity() {
        return cache.capacity();
    }

    @Override
    public void truncate(int n) {
        cache.truncate(n);
    }

    @Override
    public long bytes() {
        return cache.bytes();
    }

    @Override
    public void close() {
        cache.close();
    }
}
