package dev.glimmer.engine.backend;

import java.util.List;
import java.util.Optional;

/**
 * The sequences of one model on one backend, up to {@link #slots} at once, each a {@link TokenDecoder} with a
 * KV cache of the same capacity. A decode step of several of them ({@link #step}) is one pass over the weights
 * where the backend batches (CUDA, Metal, the emulator: one KV pool and a batch decode list), or one step after another
 * where it does not ({@link #oneByOne}). Not thread-safe: one caller at a time.
 */
public interface SequencePool extends AutoCloseable {

    /** A new empty sequence on a free slot; closing it frees the slot. At most {@link #slots} are open at once. */
    TokenDecoder open();

    /** Sequences open at once at most. */
    int slots();

    /** Memory one more sequence costs (its KV cache; host or device), for the KV budget. */
    long bytesPerSequence();

    /** Sequences open now (at most {@link #slots}). */
    int inUse();

    /**
     * Memory the pool holds now, host or device: its KV pool and every list's working buffers where the sequences
     * share them, else its open sequences' own.
     */
    long bytes();

    /**
     * One decode step: {@code tokens[i]} goes into {@code sequences.get(i)} (distinct, open, of this pool) at its
     * next position. Each gets what {@code readouts[i]} asks: its logits (an array the sequence may reuse, valid
     * until its next run), or its greedy token alone.
     */
    Next[] step(List<TokenDecoder> sequences, int[] tokens, Readout[] readouts);

    /**
     * Starts the decode step {@link #step} describes and returns while the device computes it, where the backend
     * can (CUDA queues the step's graph and its copies back on its stream), so that the caller can do other work
     * meanwhile; {@link Launched#results} waits for it. Until then the caller must not use this pool or any of its
     * sequences. Elsewhere the step runs here and now.
     */
    default Launched launch(List<TokenDecoder> sequences, int[] tokens, Readout[] readouts) {
        Next[] next = step(sequences, tokens, readouts);
        return () -> next;
    }

    /** A decode step under way ({@link #launch}). */
    @FunctionalInterface
    interface Launched {
        /** Waits for the step and gives back what each row asked for, as {@link #step} does. Called once. */
        Next[] results();
    }

    /**
     * What one row of a step gives back: its logits, or ({@code greedy}) its greedy token, the first maximum of its
     * logits, alone, so that a GPU copies one number instead of the vocabulary's. A greedy row may name tokens it
     * bans (a logit bias of minus infinity, as {@code ignore_eos} gives the end tokens): when its first maximum is
     * one of them, its logits come back instead, for the sampler to pick among the others.
     */
    record Readout(boolean greedy, int[] banned) {
        public static final Readout LOGITS = new Readout(false, new int[0]);
        public static final Readout GREEDY = new Readout(true, new int[0]);

        public Readout {
            banned = banned.clone();
        }

        /** A greedy row that bans {@code banned}. */
        public static Readout greedyBanning(int[] banned) {
            return new Readout(true, banned);
        }

        /** True when {@code greedyToken}, the row's first maximum, may stand in for its logits. */
        public boolean takes(int greedyToken) {
            if (!greedy) {
                return false;
            }
            for (int b : banned) {
                if (b == greedyToken) {
                    return false;
                }
            }
            return true;
        }
    }

    /** What a step gives one sequence to pick its next token from: its logits, or (logits null) the greedy token alone. */
    record Next(float[] logits, int greedyToken) {
        public static Next of(float[] logits) {
            return new Next(logits, -1);
        }

        public static Next greedy(int token) {
            return new Next(null, token);
        }
    }

    /**
     * Times one decode step of {@code sequences} kernel by kernel ({@link KernelTimings}; their positions advance),
     * where the backend can; empty elsewhere.
     */
    default Optional<KernelTimings.Profile> profileStep(List<TokenDecoder> sequences, int[] tokens) {
        return Optional.empty();
    }

    /** Frees what the pool holds (its sequences must be closed first). */
    @Override
    void close();

    /**
     * A pool whose sequences are independent decoders of {@code capacity} positions from {@code decoders}, stepped
     * one after another (backends without a batch decode step). Each sequence's memory is what one decoder takes.
     */
    static SequencePool oneByOne(BackendChoice.Decoders decoders, int slots, int capacity) {
        long bytes = decoders.bytesPerSequence(capacity);
        return new SequencePool() {
            private int open;

            /** A decoder of its own, counted while it is open. */
            @Override
            public TokenDecoder open() {
                if (open == slots) {
                    throw new IllegalStateException("all " + slots + " sequences of the pool are in use");
                }
                TokenDecoder d = decoders.open(capacity);
                open++;
                return new TokenDecoder() {
                    private boolean closed;

                    @Override
                    public float[] forward(int[] tokens, int from, int count) {
                        return d.forward(tokens, from, count);
                    }

                    @Override
                    public int forwardGreedy(int[] tokens, int from, int count) {
                        return d.forwardGreedy(tokens, from, count);
                    }

                    @Override
                    public int position() {
                        return d.position();
                    }

                    @Override
                    public int capacity() {
                        return d.capacity();
                    }

                    @Override
                    public void truncate(int n) {
                        d.truncate(n);
                    }

                    @Override
                    public long bytes() {
                        return d.bytes();
                    }

                    @Override
                    public void close() {
                        if (!closed) {
                            closed = true;
                            open--;
                            d.close();
                        }
                    }
                };
            }

            @Override
            public int slots() {
                return slots;
            }

            @Override
            public long bytesPerSequence() {
                return bytes;
            }

            @Override
            public int inUse() {
                return open;
            }

            @Override
            public long bytes() {
                return open * bytes;
            }

            @Override
            public Next[] step(List<TokenDecoder> sequences, int[] tokens, Readout[] readouts) {
                Next[] next = new Next[sequences.size()];
                for (int i = 0; i < next.length; i++) {
                    TokenDecoder d = sequences.get(i);
                    // a row with banned tokens takes its logits: a decoder cannot give them after its greedy step
                    next[i] = readouts[i].greedy() && readouts[i].banned().length == 0
                            ? Next.greedy(d.forwardGreedy(tokens, i, 1)) : Next.of(d.forward(tokens, i, 1));
                }
                return next;
            }

            @Override
            public void close() {
            }
        };
    }
}
