package dev.glimmer.server.inference;

import dev.glimmer.engine.backend.BackendChoice;
import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.TokenDecoder;
import dev.glimmer.kernels.decode.DecodeModel;
import dev.glimmer.kernels.decode.MemoryBudget;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Steps on a backend whose sequences are {@link TokenDecoder}s (the GPU backends): each cached conversation is
 * a sequence of the backend's {@link SequencePool}, whose KV cache lives on the device (a slot of one KV pool);
 * a decode step advances all running sequences in one {@link SequencePool#step} (one pass over the weights for
 * all of them; backends without a batch step feed them one after another), launched on the device before the
 * scheduler delivers the previous step's tokens ({@link SequencePool#launch}). Prefix reuse
 * truncates a sequence ({@link TokenDecoder#truncate}).
 */
final class DecoderStepRunner implements StepRunner<DecoderStepRunner.DecoderCache> {

    /** A sequence as a {@link SequenceCache}. */
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
    private final SequencePool pool;

    /**
     * Takes ownership of {@code backend} (closed with this runner) and makes its pool of sequences of {@code ctx}
     * positions of {@code model}: as many as {@code budgetBytes} of KV caches hold, at least {@code parallel}; with
     * no budget ({@code 0}), {@link MemoryBudget#poolSlots} (fewer, down to {@code parallel}, where the device offers
     * less: {@link MemoryBudget#forServing}).
     *
     * @throws PoolDoesNotFitException when the device says it cannot hold the pool, with what to change
     */
    DecoderStepRunner(BackendChoice backend, DecodeModel model, int ctx, long budgetBytes, int parallel) {
        this.backend = backend;
        this.pool = backend.decoders().pool(slots(backend, model, ctx, budgetBytes, parallel), ctx);
    }

    private static int slots(BackendChoice backend, DecodeModel model, int ctx, long budgetBytes, int parallel) {
        Optional<BackendChoice.DeviceMemory> memory = backend.decoders().deviceMemory();
        long available = memory.map(BackendChoice.DeviceMemory::available).orElse(-1L);
        boolean weightsThere = memory.map(BackendChoice.DeviceMemory::weightsThere).orElse(false);
        MemoryBudget budget;
        if (budgetBytes > 0) {
            long slots = Math.max(parallel, budgetBytes / backend.decoders().bytesPerSequence(ctx));
            if (memory.isEmpty()) {
                return Math.toIntExact(Math.min(slots, Integer.MAX_VALUE));
            }
            budget = MemoryBudget.of(model, ctx, Math.toIntExact(Math.min(slots, Integer.MAX_VALUE)));
        } else if (memory.isEmpty()) {
            return MemoryBudget.poolSlots(parallel);
        } else {
            budget = MemoryBudget.forServing(model, ctx, parallel, available, weightsThere);
        }
        if (!budget.fits(available, weightsThere)) {
            throw new PoolDoesNotFitException(budget.doesNotFit(memory.get().device(), available, weightsThere));
        }
        return budget.slots();
    }

    @Override
    public BackendKind backend() {
        return backend.kind();
    }

    @Override
    public DecoderCache newCache() {
        return new DecoderCache(pool.open());
    }

    @Override
    public long cacheBytes() {
        return pool.bytesPerSequence();
    }

    /** The pool was sized from the budget when it was made: the session manager keeps to exactly what it holds. */
    @Override
    public long budgetBytes(long configured, int parallel) {
        return pool.slots() * cacheBytes();
    }

    @Override
    public Optional<PoolUse> poolUse() {
        return Optional.of(new PoolUse(pool.inUse(), pool.slots(), pool.bytes()));
    }

    @Override
    public float[] prefill(DecoderCache cache, int[] tokens, int from, int count) {
        return cache.decoder().forward(tokens, from, count);
    }

    /** Greedy sequences read back only their greedy token (where it is not one they ban). */
    @Override
    public DecodeStep decode(List<DecoderCache> caches, int[] tokens, SequencePool.Readout[] readouts) {
        List<TokenDecoder> sequences = new ArrayList<>(caches.size());
        for (DecoderCache c : caches) {
            sequences.add(c.decoder());
        }
        SequencePool.Launched launched = pool.launch(sequences, tokens, readouts);
        return () -> {
            SequencePool.Next[] next = launched.results();
            NextToken[] out = new NextToken[next.length];
            for (int i = 0; i < out.length; i++) {
                // Logits in an array the sequence may reuse: valid until its next step, after the scheduler picked.
                out[i] = next[i].logits() == null ? NextToken.greedy(next[i].greedyToken()) : NextToken.of(next[i].logits());
            }
            return out;
        };
    }

    /** Frees the pool, then the backend (the sessions' caches are closed before: the scheduler's release). */
    @Override
    public void close() {
        try {
            pool.close();
        } finally {
            backend.close();
        }
    }
}
