package dev.glimmer.engine.backend.cuda;

import dev.glimmer.engine.backend.GpuTokenDecoder;
import dev.glimmer.engine.backend.KernelTimings;
import dev.glimmer.engine.backend.PartialSteps;
import dev.glimmer.kernels.decode.CommandList;

import java.util.List;

/**
 * A sequence on the CUDA backend as a {@link GpuTokenDecoder}: one slot of a {@link CudaDecoder}'s KV pool.
 * Prompts run the prompt graph in batches, single tokens the decode graph; only the last token's logits (into
 * pinned memory, then an array reused from run to run) or, for {@link #forwardGreedy}, only its greedy token
 * are copied to the host. Several sequences of one pool step together through {@link CudaSequencePool}.
 */
public final class CudaTokenDecoder implements GpuTokenDecoder, PartialSteps, KernelTimings {

    private final CudaDecoder pool;
    private final CudaDecoder.Sequence sequence;
    /** What closing this sequence frees beyond its slot: nothing (a pool's), or its own pool and weights. */
    private final AutoCloseable owned;

    CudaTokenDecoder(CudaDecoder pool, CudaDecoder.Sequence sequence, AutoCloseable owned) {
        this.pool = pool;
        this.sequence = sequence;
        this.owned = owned;
    }

    /** A sequence with a pool of its own over weights shared with other sequences (the caller closes them). */
    public CudaTokenDecoder(CudaWeights weights, int capacity) {
        this(new CudaDecoder(weights, capacity), null);
    }

    private CudaTokenDecoder(CudaDecoder pool, AutoCloseable alsoOwned) {
        this(pool, pool.open(), () -> {
            pool.close();
            if (alsoOwned != null) {
                alsoOwned.close();
            }
        });
    }

    /** A sequence with weights of its own, freed when it closes (the self-test's single-sequence models). */
    public static CudaTokenDecoder withOwnWeights(CudaWeights weights, int capacity) {
        try {
            return new CudaTokenDecoder(new CudaDecoder(weights, capacity), weights);
        } catch (RuntimeException e) {
            weights.close();
            throw e;
        }
    }

    CudaDecoder.Sequence sequence() {
        return sequence;
    }

    /** One token runs the decode graph, more the prompt graph in batches; only the last token's logits come back. */
    @Override
    public float[] forward(int[] tokens, int from, int count) {
        return count == 1 ? sequence.step(tokens[from]) : sequence.prompt(tokens, from, count);
    }

    /** The tokens as in {@link #forward}, with only the argmax's 4 bytes read back. */
    @Override
    public int forwardGreedy(int[] tokens, int from, int count) {
        return count == 1 ? sequence.stepGreedy(tokens[from]) : sequence.promptGreedy(tokens, from, count);
    }

    // From here, plain delegation to the CudaDecoder and its sequence.
    @Override
    public int greedyToken() {
        return pool.greedyToken();
    }

    @Override
    public int position() {
        return sequence.position();
    }

    @Override
    public int capacity() {
        return sequence.capacity();
    }

    @Override
    public void truncate(int n) {
        sequence.truncate(n);
    }

    /** Device memory of this sequence: its pool's all when it owns one, else its slot of the KV pool. */
    @Override
    public long bytes() {
        return owned != null ? pool.deviceBytes() : pool.kvBytesPerSequence();
    }

    @Override
    public Profile profileStep(int token) {
        return sequence.profileStep(token);
    }

    @Override
    public int promptBatch() {
        return pool.promptBatch();
    }

    @Override
    public Profile profilePrompt(int[] tokens, int from, int count) {
        return sequence.profilePrompt(tokens, from, count);
    }

    @Override
    public CommandList commandList() {
        return pool.commandList();
    }

    @Override
    public float[] partialStep(int token, int position, int dispatches, int buffer, long offset, int count) {
        return sequence.partialStep(token, position, dispatches, buffer, offset, count);
    }

    @Override
    public void close() {
        sequence.close();
        if (owned != null) {
            try {
                owned.close();
            } catch (RuntimeException e) {
                throw e;
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }
    }
}
