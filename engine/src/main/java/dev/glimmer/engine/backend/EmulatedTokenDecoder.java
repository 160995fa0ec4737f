package dev.glimmer.engine.backend;

import dev.glimmer.engine.backend.emulated.EmulatedDecoder;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.kernels.emulator.FiberOrder;

import java.util.ArrayList;
import java.util.List;

/**
 * The GPU decode step on the CPU kernel emulator, as a {@link TokenDecoder}: slow, but it runs the
 * same command lists and kernels as Metal and CUDA, so the self-test (and the server's tests of serving on a
 * GPU-style decoder) can check the GPU path where there is no GPU. Needs clang-19 to build the emulator.
 * One sequence of an {@link EmulatedDecoder} pool; {@link #decoders} makes pools whose sequences step together
 * through the batch decode list.
 */
public final class EmulatedTokenDecoder implements GpuTokenDecoder {

    /**
     * Tokens of a prompt batch: fewer than a GPU's (the emulator runs every threadgroup of a batch, used
     * or not), but enough that prompts span several batches, the last one partly used.
     */
    static final int PROMPT_TOKENS = 4;

    private final EmulatedDecoder pool;
    private final EmulatedDecoder.Sequence sequence;
    /** Whether this sequence owns its pool (a decoder of its own) or is one slot of a shared one. */
    private final boolean ownsPool;

    /** A sequence with a pool of its own. */
    public EmulatedTokenDecoder(GlmModel model, int capacity) {
        this(new EmulatedDecoder(model, capacity, FiberOrder.inOrder(), PROMPT_TOKENS), true);
    }

    private EmulatedTokenDecoder(EmulatedDecoder pool, boolean ownsPool) {
        this.pool = pool;
        this.sequence = pool.open();
        this.ownsPool = ownsPool;
    }

    /**
     * The emulated backend's sequences for {@code model}: alone ({@link BackendChoice.Decoders#open}) or in a pool
     * of one KV buffer per layer whose sequences step together through the batch decode list.
     */
    public static BackendChoice.Decoders decoders(GlmModel model) {
        return new BackendChoice.Decoders() {
            @Override
            public TokenDecoder open(int capacity) {
                return new EmulatedTokenDecoder(model, capacity);
            }

            @Override
            public SequencePool pool(int slots, int capacity) {
                return new Pool(new EmulatedDecoder(model, capacity, slots, FiberOrder.inOrder(), PROMPT_TOKENS));
            }

            @Override
            public long bytesPerSequence(int capacity) {
                try (EmulatedDecoder probe = new EmulatedDecoder(model, capacity, FiberOrder.inOrder(), PROMPT_TOKENS)) {
                    return probe.kvBytesPerSequence();
                }
            }
        };
    }

    /** Sequences of one emulated pool, stepped together (the same delegation as CudaSequencePool's, to another decoder). */
    private record Pool(EmulatedDecoder decoder) implements SequencePool {
        @Override
        public TokenDecoder open() {
            return new EmulatedTokenDecoder(decoder, false);
        }

        @Override
        public int slots() {
            return decoder.slots();
        }

        @Override
        public long bytesPerSequence() {
            return decoder.kvBytesPerSequence();
        }

        @Override
        public int inUse() {
            return decoder.inUse();
        }

        @Override
        public long bytes() {
            return decoder.bytes();
        }

        @Override
        public Next[] step(List<TokenDecoder> sequences, int[] tokens, Readout[] readouts) {
            List<EmulatedDecoder.Sequence> own = new ArrayList<>();
            for (TokenDecoder d : sequences) {
                if (!(d instanceof EmulatedTokenDecoder e) || e.pool != decoder) {
                    throw new IllegalArgumentException("a sequence of another pool in an emulated step");
                }
                own.add(e.sequence);
            }
            float[][] logits = decoder.step(own, tokens);
            int[] greedy = decoder.greedyTokens();
            Next[] next = new Next[logits.length];
            for (int i = 0; i < next.length; i++) {
                next[i] = readouts[i].takes(greedy[i]) ? Next.greedy(greedy[i]) : Next.of(logits[i]);
            }
            return next;
        }

        @Override
        public void close() {
            decoder.close();
        }
    }

    // From here, plain delegation to the EmulatedDecoder and its sequence, as CudaTokenDecoder delegates to its
    // CudaDecoder: the two decoders share no type (one drives the emulator, the other a device), only this shape.
    @Override
    public float[] forward(int[] tokens, int from, int count) {
        return count == 1 ? sequence.step(tokens[from]) : sequence.prompt(tokens, from, count);
    }
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
        return pool.contextSize();
    }

    @Override
    public void truncate(int n) {
        sequence.truncate(n);
    }

    /** The whole pool's memory when it is this sequence's own, else its slot's KV rows. */
    @Override
    public long bytes() {
        return ownsPool ? pool.bytes() : pool.kvBytesPerSequence();
    }

    @Override
    public void close() {
        sequence.close();
        if (ownsPool) {
            pool.close();
        }
    }
}
