package dev.glimmer.engine.backend;

import dev.glimmer.engine.InvalidInputException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import java.util.stream.IntStream;

/**
 * The one contract between a backend and everything above it (the server, {@code generate}, {@code logits},
 * {@code bench}): up to {@link #slots} sequences of {@link #capacity} positions each, opened and closed here, whose
 * prompts ({@link #prompt}) and decode steps ({@link #step}, {@link #launch}) the pool runs, and whose readouts (the
 * greedy token, the logits) it gives back. Two kinds implement it: the CPU's batched forward pass
 * ({@code CpuSequencePool}) and the GPU command lists over one KV pool ({@code CommandListPool}, on CUDA, Metal or the
 * kernel emulator). A decode step of several sequences is one pass over the weights on both.
 *
 * <p>Not thread-safe: one caller at a time.
 */
public interface SequencePool extends AutoCloseable {

    /**
     * One sequence of a pool: its KV rows and its position. Only its pool runs it; closing it frees its slot (and
     * its memory where the pool allocates per sequence).
     */
    interface Sequence extends AutoCloseable {
        /** Positions already in the KV cache. */
        int position();

        /** Positions it holds at most. */
        int capacity();

        /**
         * Keeps the first {@code n} positions ({@code 0 ≤ n ≤ position()}) and forgets the rest, so that a request
         * sharing a prefix with what it holds continues from there.
         */
        void truncate(int n);

        @Override
        void close();
    }

    /** A new empty sequence on a free slot. At most {@link #slots} are open at once. */
    Sequence open();

    /** Sequences open at once at most. */
    int slots();

    /** Positions each sequence holds at most. */
    int capacity();

    /** Memory one sequence's KV cache takes (host or device), for the KV budget. */
    long bytesPerSequence();

    /** Sequences open now. */
    int inUse();

    /** Memory the pool holds now, host or device: its KV pool and working buffers, or its open sequences' caches. */
    long bytes();

    /**
     * Runs {@code tokens[from .. from+count)} into {@code sequence} after its positions (in batches of the pool's
     * choosing) and gives back what {@code readout} asks of the last of them.
     */
    Next prompt(Sequence sequence, int[] tokens, int from, int count, Readout readout);

    /**
     * Runs the next part of several sequences' prompts: {@code counts[i]} tokens of {@code tokens.get(i)} from
     * {@code from[i]} into {@code sequences.get(i)} (distinct, open, of this pool) after its positions, and gives back
     * what {@code readouts[i]} asks of each one's last token, each as {@link #prompt} would. A pool that can puts them
     * through its forward pass as rows of one batch (the weights read once for all); this one runs them one after
     * another.
     */
    default Next[] prompts(List<Sequence> sequences, List<int[]> tokens, int[] from, int[] counts, Readout[] readouts) {
        Next[] next = new Next[sequences.size()];
        for (int i = 0; i < next.length; i++) {
            Next one = prompt(sequences.get(i), tokens.get(i), from[i], counts[i], readouts[i]);
            // prompt's logits may live in a buffer the next run reuses.
            next[i] = one.logits() == null ? one : new Next(one.logits().clone(), one.greedyToken());
        }
        return next;
    }

    /**
     * Runs the tokens as {@link #prompt} does and gives back the logits after every one of them ({@code count ×
     * vocabulary} values, a new array), for comparing with other implementations ({@code ./glimmer logits --all}).
     */
    float[] promptLogits(Sequence sequence, int[] tokens, int from, int count);

    /**
     * One decode step: {@code tokens[i]} goes into {@code sequences.get(i)} (distinct, open, of this pool) at its next
     * position, and each gets what {@code readouts[i]} asks (logits in an array its slot may reuse, valid until its
     * next run).
     */
    default Next[] step(List<Sequence> sequences, int[] tokens, Readout[] readouts) {
        return launch(sequences, tokens, readouts).results();
    }

    /**
     * Starts the decode step {@link #step} describes and returns while the device computes it where the backend can
     * (CUDA queues it on its stream), so that the caller can do other work meanwhile; {@link Launched#results} waits
     * for it. Until then the caller must not use this pool or its sequences. Elsewhere the step runs here and now.
     */
    Launched launch(List<Sequence> sequences, int[] tokens, Readout[] readouts);

    /**
     * Decode steps of {@code sequences} (distinct, open, of this pool) until every row has stopped: {@code tokens[i]}
     * goes into {@code sequences.get(i)}, and after each step of a row {@code picker} gets what the row's readout
     * ({@code readouts[i]}, the same at every step) gave and picks the row's next token, or {@link #STOP}. When the
     * picker hears of a row's step its sequence holds that step's token ({@link Sequence#position} counts it), and a row
     * that stops holds exactly the tokens fed to it, whatever the pool ran ahead.
     *
     * <p>The tokens are those of {@link #step}s one after the other (this is the default); a GPU pool chains greedy
     * steps on the device instead, queueing each row's next step on the greedy token its step leaves there before the
     * host has read it, so that the device goes from step to step without waiting for the host.
     *
     * @throws InvalidInputException when a token is outside the vocabulary or a sequence is full (the picker must stop
     *     a row whose sequence has no room left)
     */
    default void decode(List<Sequence> sequences, int[] tokens, Readout[] readouts, Picker picker) {
        List<Sequence> rows = new ArrayList<>(sequences);
        int[] feed = tokens.clone();
        Readout[] asks = readouts.clone();
        int[] index = IntStream.range(0, rows.size()).toArray();
        while (!rows.isEmpty()) {
            Next[] next = step(rows, feed, asks);
            int kept = 0;
            for (int i = 0; i < next.length; i++) {
                int token = picker.pick(index[i], next[i]);
                if (token != STOP) {
                    rows.set(kept, rows.get(i));
                    feed[kept] = token;
                    asks[kept] = asks[i];
                    index[kept] = index[i];
                    kept++;
                }
            }
            rows.subList(kept, rows.size()).clear();
            feed = Arrays.copyOf(feed, kept);
            asks = Arrays.copyOf(asks, kept);
        }
    }

    /** What a {@link Picker} gives for a row that ends. */
    int STOP = -1;

    /** Picks each row's next token in {@link #decode}. */
    @FunctionalInterface
    interface Picker {
        /**
         * The token row {@code row} (its index in the sequences given to {@link #decode}) feeds next, picked from what
         * its step gave ({@code next}, as {@link #step} gives it), or {@link #STOP} to end the row.
         */
        int pick(int row, Next next);
    }

    /** A decode step under way ({@link #launch}). */
    @FunctionalInterface
    interface Launched {
        /** Waits for the step and gives back what each row asked for, as {@link #step} does. Called once. */
        Next[] results();
    }

    /**
     * What one row of a run gives back: its logits, or ({@code greedy}) its greedy token, the first maximum of its
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

    /**
     * What a run gives one sequence to pick its next token from: its logits, or (logits null) its greedy token alone.
     * The greedy token, the first maximum of the logits (a GPU's argmax dispatch), comes with the logits too.
     */
    record Next(float[] logits, int greedyToken) {
        public static Next greedy(int token) {
            return new Next(null, token);
        }
    }

    /**
     * Tokens a {@link #speculate} step drafts at most: 0 when the pool does not draft (the model has no NextN block,
     * or the pool was made without drafting).
     */
    default int maxDrafts() {
        return 0;
    }

    /**
     * A speculative decode step of one sequence (docs/SPECULATIVE.md): the pool drafts up to {@code drafts} tokens
     * ({@code ≤ maxDrafts()}, fewer where the context ends) after {@code token} with the model's NextN block, each the
     * first maximum of the block's logits, lets {@code filter} change them (benchmarks only: {@link DraftFilter#NONE}
     * otherwise), then runs {@code token} and the drafts at the sequence's next positions as rows of one pass and gives
     * back what {@code readout} asks of every row. The position advances past all of them; the caller keeps
     * {@code token} and the drafts it accepts with {@link Sequence#truncate} ({@code position before + 1 + accepted}):
     * the rows after that are overwritten by the next run, nothing is copied.
     *
     * <p>The pool keeps what drafting needs of a sequence through all its runs ({@link #prompt}, {@link #step} and
     * this): the NextN block's own KV rows and the trunk's last outputs.
     */
    default Speculation speculate(Sequence sequence, int token, int drafts, Readout readout, DraftFilter filter) {
        throw new UnsupportedOperationException("this pool does not draft");
    }

    /**
     * What a {@link #speculate} step gave: the drafted tokens (after the filter), and one readout per row: row 0 after
     * the token fed, row i after draft i-1, so row i's pick is what draft i is checked against.
     */
    record Speculation(int[] drafts, Next[] rows) {}

    /** Changes the drafted tokens before they are verified: {@code drafts[i]} is the token for {@code position + i}. */
    @FunctionalInterface
    interface DraftFilter {
        DraftFilter NONE = (position, drafts) -> {};

        void replace(int position, int[] drafts);

        /**
         * Replaces each draft by the token {@code reference} holds for its position ({@code reference[i]} is the token
         * at position {@code first + i}: what decoding without drafts put there) with probability {@code accept}, by
         * the token after it otherwise (a wrong one); drafts outside the reference stay. So the real drafting,
         * verification and rollback run at a chosen acceptance on random weights ({@code bench --draft-accept}).
         */
        static DraftFilter towards(int[] reference, int first, double accept, Random random, int vocab) {
            return (position, drafts) -> {
                for (int i = 0; i < drafts.length; i++) {
                    int index = position + i - first;
                    if (index >= 0 && index < reference.length) {
                        int right = reference[index];
                        drafts[i] = random.nextDouble() < accept ? right : (right + 1) % vocab;
                    }
                }
            };
        }
    }

    /**
     * Bytes of one position's KV rows in every layer, as {@link #exportPrefix} writes them (the pool's own row size and
     * element type: opaque to everything above it).
     */
    long bytesPerPosition();

    /**
     * What the rows {@link #exportPrefix} writes are (the pool kind, its KV element type, its row size): only a pool of
     * the same layout and model may {@link #importPrefix} them. Part of the key of a KV row file on disk.
     */
    String kvLayout();

    /**
     * Copies the KV rows of {@code sequence}'s first {@code n} positions ({@code n ≤ position()}) into {@code into}
     * ({@code n × bytesPerPosition()} bytes at least), so that another sequence of a pool of the same
     * {@link #kvLayout} continues from them ({@link #importPrefix}): the RAM and disk tiers.
     */
    void exportPrefix(Sequence sequence, int n, MemorySegment into);

    /**
     * Puts rows written by {@link #exportPrefix} for {@code n} positions ({@code n ≤ capacity()}) at {@code sequence}'s
     * positions 0 .. n-1; its position becomes {@code n}, and it continues exactly as the exporting sequence would.
     */
    void importPrefix(Sequence sequence, MemorySegment from, int n);

    /**
     * Gives {@code to} the first {@code n} positions of {@code from} (both open sequences of this pool; {@code to}'s
     * position becomes {@code n}): a prefix shared by two conversations is computed once.
     */
    default void copyPrefix(Sequence from, Sequence to, int n) {
        try (Arena staging = Arena.ofConfined()) {
            MemorySegment rows = staging.allocate(Math.max(1, n * bytesPerPosition()), 64);
            exportPrefix(from, n, rows);
            importPrefix(to, rows, n);
        }
    }

    /** Times the pool's steps kernel by kernel, where the backend can (CUDA); empty elsewhere. */
    default Optional<KernelTimings> timings() {
        return Optional.empty();
    }

    /** Frees what the pool holds (its sequences must be closed first). */
    @Override
    void close();
}
