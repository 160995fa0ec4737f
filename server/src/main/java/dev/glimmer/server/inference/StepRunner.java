package dev.glimmer.server.inference;

import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.SequencePool;

import java.util.List;
import java.util.Optional;

/**
 * The scheduler's model work on one backend: it makes the KV caches the session manager keeps (one
 * per cached conversation) and runs prompt chunks and decode steps over them. Two kinds:
 * {@link CpuStepRunner}, the CPU's batched forward pass over host caches (the sequences of a decode
 * step share one pass over the weights), and {@link DecoderStepRunner}, one
 * {@link dev.glimmer.engine.backend.TokenDecoder} per conversation (a GPU holds each cache), stepped
 * one after another. Each runner computes with the caches it made, of its own type {@code C}. Called from
 * the scheduler's thread only (and {@link #close} after it stopped).
 */
interface StepRunner<C extends SequenceCache> extends AutoCloseable {

    /** The backend it runs on. */
    BackendKind backend();

    /** An empty cache of the served context, for one conversation. */
    C newCache();

    /** Memory one cache takes (host or device), for the KV budget. */
    long cacheBytes();

    /**
     * The memory the session manager's caches may take: {@code configured} bytes, or with none ({@code 0}) room
     * for {@code parallel} + 2 caches (a follow-up turn can find its conversation while others run).
     */
    default long budgetBytes(long configured, int parallel) {
        return configured > 0 ? configured : (parallel + 2L) * cacheBytes();
    }

    /**
     * The pool the caches are slots of, now (a GPU backend's {@link dev.glimmer.engine.backend.SequencePool}); empty
     * where each cache is memory of its own (the CPU).
     */
    default Optional<PoolUse> poolUse() {
        return Optional.empty();
    }

    /** A pool's slots in use (a cache each) and in all, and the memory it holds (its KV pool and working buffers). */
    record PoolUse(int slotsInUse, int slots, long bytes) {
    }

    /**
     * Runs {@code tokens[from .. from+count)} after the positions {@code cache} holds, which it then
     * holds too; returns the logits after the last of them (vocabulary-sized, valid until the next call).
     */
    float[] prefill(C cache, int[] tokens, int from, int count);

    /**
     * Starts one decode step of the sequences of {@code caches}: {@code tokens[i]} goes into {@code caches.get(i)}
     * (distinct caches). Its results say what each sequence's next token is picked from: its logits, or, where
     * {@code readouts[i]} takes it (its sampler picks the first maximum and nothing else reads the logits), the
     * runner may give only that greedy token (a GPU then copies no logits to the host). On a GPU this returns while
     * the device computes, so that the scheduler can deliver the previous tokens meanwhile; until
     * {@link DecodeStep#results} the caller must not use this runner or its caches. On the CPU the step is done when
     * this returns.
     */
    DecodeStep decode(List<C> caches, int[] tokens, SequencePool.Readout[] readouts);

    /** A decode step under way. */
    @FunctionalInterface
    interface DecodeStep {
        /** Waits for the step; row i is what sequence i picks its next token from. Called once. */
        NextToken[] results();
    }

    /** What a step gives one sequence to pick its next token from: its logits, or (logits null) the greedy token alone. */
    record NextToken(float[] logits, int greedyToken) {
        static NextToken of(float[] logits) {
            return new NextToken(logits, -1);
        }

        static NextToken greedy(int token) {
            return new NextToken(null, token);
        }
    }

    /** Frees what the backend holds beyond the caches (a GPU's copy of the weights). */
    @Override
    void close();
}
