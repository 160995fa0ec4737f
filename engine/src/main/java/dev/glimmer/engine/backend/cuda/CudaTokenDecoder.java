package dev.glimmer.engine.backend.cuda;

import dev.glimmer.engine.backend.GpuTokenDecoder;
import dev.glimmer.engine.backend.KernelTimings;
import dev.glimmer.engine.backend.PartialSteps;
import dev.glimmer.kernels.decode.CommandList;

import java.util.List;

/**
 * A sequence on the CUDA backend as a {@link GpuTokenDecoder}: prompts run the prompt graph in batches,
 * single tokens the decode graph; only the last token's logits (into pinned memory, then an array
 * reused from run to run) or, for {@link #forwardGreedy}, only its greedy token are copied to the host.
 */
public final class CudaTokenDecoder implements GpuTokenDecoder, PartialSteps, KernelTimings {

    private final CudaDecoder decoder;
    private final CudaWeights ownedWeights;

    /** A sequence over weights shared with other sequences (the caller closes them). */
    public CudaTokenDecoder(CudaWeights weights, int capacity) {
        this(weights, capacity, false);
    }

    private CudaTokenDecoder(CudaWeights weights, int capacity, boolean owned) {
        this.decoder = new CudaDecoder(weights, capacity);
        this.ownedWeights = owned ? weights : null;
    }

    /** A sequence with weights of its own, freed when it closes (the self-test's single-sequence models). */
    public static CudaTokenDecoder withOwnWeights(CudaWeights weights, int capacity) {
        try {
            return new CudaTokenDecoder(weights, capacity, true);
        } catch (RuntimeException e) {
            weights.close();
            throw e;
        }
    }

    /** One token runs the decode graph, more the prompt graph in batches; only the last token's logits come back. */
    @Override
    public float[] forward(int[] tokens, int from, int count) {
        return count == 1 ? decoder.step(tokens[from]) : decoder.prompt(tokens, from, count);
    }

    /** The tokens as in {@link #forward}, with only the argmax's 4 bytes read back. */
    @Override
    public int forwardGreedy(int[] tokens, int from, int count) {
        return count == 1 ? decoder.stepGreedy(tokens[from]) : decoder.promptGreedy(tokens, from, count);
    }

    // From here, plain delegation to the CudaDecoder, as EmulatedTokenDecoder delegates to its EmulatedDecoder.
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
    public void truncate(int n) {
        if (n < 0 || n > decoder.position()) {
            throw new IllegalArgumentException("cannot truncate a sequence of " + decoder.position() + " positions to " + n);
        }
        decoder.seek(n);
    }

    /** Device memory of this sequence: KV cache, activations, arguments (the weights are shared). */
    @Override
    public long bytes() {
        return decoder.deviceBytes();
    }

    @Override
    public Profile profileStep(int token) {
        return decoder.profileStep(token);
    }

    @Override
    public int promptBatch() {
        return decoder.promptBatch();
    }

    @Override
    public Profile profilePrompt(int[] tokens, int from, int count) {
        return decoder.profilePrompt(tokens, from, count);
    }

    @Override
    public CommandList commandList() {
        return decoder.commandList();
    }

    @Override
    public float[] partialStep(int token, int position, int dispatches, int buffer, long offset, int count) {
        return decoder.partialStep(token, position, dispatches, buffer, offset, count);
    }

    @Override
    public void close() {
        decoder.close();
        if (ownedWeights != null) {
            ownedWeights.close();
        }
    }
}
