package dev.glimmer.engine.backend;

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
}
