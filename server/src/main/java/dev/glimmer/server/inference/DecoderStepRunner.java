package dev.glimmer.server.inference;

import dev.glimmer.engine.backend.BackendChoice;
import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.TokenDecoder;

import java.util.List;

/**
 * Steps on a backend whose sequences are {@link TokenDecoder}s (the GPU backends): each cached
 * conversation is a decoder holding its KV cache on the device; a decode step feeds the sequences one
 * after another. Prefix reuse truncates a decoder ({@link TokenDecoder#truncate}).
 */
final class DecoderStepRunner implements StepRunner<DecoderStepRunner.DecoderCache> {

    /** A decoder as a {@link SequenceCache}. */
    record DecoderCache(TokenDecoder decoder) implements SequenceCache {
        @Override
        public int size() {
            return decoder.position();
        }

        @Override
        public int capacity() {
            return decoder.capacity();
        }

        @Override
        public void truncate(int n) {
            decoder.truncate(n);
        }

        @Override
        public void close() {
            decoder.close();
        }
    }

    private final BackendChoice backend;
    private final int ctx;
    private final long cacheBytes;

    /** Takes ownership of {@code backend} (closed with this runner); opens one decoder to learn its size. */
    DecoderStepRunner(BackendChoice backend, int ctx) {
        this.backend = backend;
        this.ctx = ctx;
        try (TokenDecoder probe = backend.open(ctx)) {
            this.cacheBytes = probe.bytes();
        }
    }

    @Override
    public BackendKind backend() {
        return backend.kind();
    }

    @Override
    public DecoderCache newCache() {
        return new DecoderCache(backend.open(ctx));
    }

    @Override
    public long cacheBytes() {
        return cacheBytes;
    }

    @Override
    public float[] prefill(DecoderCache cache, int[] tokens, int from, int count) {
        return cache.decoder().forward(tokens, from, count);
    }

    /** Greedy-only sequences read back only their greedy token ({@link TokenDecoder#forwardGreedy}). */
    @Override
    public NextToken[] decode(List<DecoderCache> caches, int[] tokens, boolean[] greedyOnly) {
        NextToken[] next = new NextToken[caches.size()];
        for (int i = 0; i < next.length; i++) {
            TokenDecoder d = caches.get(i).decoder();
            // Logits in an array the decoder may reuse: valid until its next step, after the scheduler picked.
            next[i] = greedyOnly[i] ? NextToken.greedy(d.forwardGreedy(tokens, i, 1)) : NextToken.of(d.forward(tokens, i, 1));
        }
        return next;
    }

    @Override
    public void close() {
        backend.close();
    }
}
