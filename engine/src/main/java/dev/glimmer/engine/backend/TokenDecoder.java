package dev.glimmer.engine.backend;

import dev.glimmer.engine.sampling.Sampler;

/**
 * One sequence being decoded on some backend: it holds the sequence's KV cache and turns tokens
 * into the logits of the next one. Not thread-safe; one per sequence.
 */
public interface TokenDecoder extends AutoCloseable {

    /**
     * Runs {@code tokens[from .. from+count)} after the positions already held and returns the
     * logits after the last of them (vocabulary-sized; a new array or one the decoder reuses).
     */
    float[] forward(int[] tokens, int from, int count);

    /**
     * Runs the tokens as {@link #forward} does and returns only the greedy next token, the first maximum
     * of the logits ({@link Sampler#argmax}). GPU decoders take it from their argmax dispatch, so that
     * greedy decoding need not copy the vocabulary-sized logits to the host.
     */
    default int forwardGreedy(int[] tokens, int from, int count) {
        float[] logits = forward(tokens, from, count);
        return Sampler.argmax(logits, logits.length);
    }

    /** Positions held in the cache. */
    int position();

    /** Positions the cache can hold. */
    int capacity();

    /**
     * Keeps the first {@code n} positions and forgets the rest ({@code 0 ≤ n ≤ position()}), so that a
     * request sharing a prefix with what the cache holds continues from there. GPU decoders only move
     * their position: attention reads the rows below the KV length alone, and later steps overwrite the rest.
     */
    void truncate(int n);

    /** Memory this sequence holds (its KV cache and working buffers): host memory on the CPU, device memory on a GPU. */
    long bytes();

    @Override
    void close();
}
