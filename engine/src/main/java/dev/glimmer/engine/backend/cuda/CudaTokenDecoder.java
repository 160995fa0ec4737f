package dev.glimmer.engine.backend.cuda;

import dev.glimmer.engine.backend.GpuTokenDecoder;

/**
 * A sequence on the CUDA backend as a {@link GpuTokenDecoder}: prompt tokens run the decode graph
 * without reading anything back; only the last token's logits are copied to the host.
 */
public final class CudaTokenDecoder implements GpuTokenDecoder {

    private final CudaDecoder decoder;

    public CudaTokenDecoder(CudaWeights weights, int capacity) {
        this.decoder = new CudaDecoder(weights, capacity);
    }

    @Override
    public float[] forward(int[] tokens, int from, int count) {
        if (count <= 0) {
            throw new IllegalArgumentException("forward needs at least one token, got " + count);
        }
        for (int i = from; i < from + count - 1; i++) {
            decoder.feed(tokens[i]);
        }
        return decoder.step(tokens[from + count - 1]);
    }

    @Override
    public int greedyToken() {
        return decoder.greedyToken();
    }

    @Override
    public int position() {
        return decoder.position();
    }

    @Override
    public int capacity() {
        return decoder.contextSize();
    }

    @Override
    public void close() {
        decoder.close();
    }
}
