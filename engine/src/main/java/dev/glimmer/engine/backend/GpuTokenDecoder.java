package dev.glimmer.engine.backend;

import dev.glimmer.engine.InvalidInputException;

/** A {@link TokenDecoder} whose step ends with an argmax dispatch on the device. */
public interface GpuTokenDecoder extends TokenDecoder {

    /** The token the last step's argmax dispatch chose (greedy decoding without reading the logits). */
    int greedyToken();

    /** The device's argmax after the step; a decoder that can skip reading the logits back does so. */
    @Override
    default int forwardGreedy(int[] tokens, int from, int count) {
        forward(tokens, from, count);
        return greedyToken();
    }

    /**
     * Checks a run of {@code tokens[from .. from+count)} after {@code position} of {@code capacity} positions,
     * before any of it reaches the device: at least one token, every id a row of the embedding table of
     * {@code vocabulary} rows, and room for all of them in the context.
     */
    static void checkRun(int[] tokens, int from, int count, int position, int capacity, int vocabulary) {
        if (count < 1) {
            throw new IllegalArgumentException("a run needs at least one token, got " + count);
        }
        for (int i = from; i < from + count; i++) {
            if (tokens[i] < 0 || tokens[i] >= vocabulary) {
                throw new InvalidInputException("token id " + tokens[i] + " is outside the vocabulary of " + vocabulary);
            }
        }
        if (position + count > capacity) {
            throw new InvalidInputException("the context of " + capacity + " positions has room for "
                    + (capacity - position) + " more tokens, not " + count);
        }
    }
}
