package dev.glimmer.engine.generate;

import dev.glimmer.engine.backend.SequencePool;
import java.util.List;

/**
 * One sequence's speculative decoding (docs/SPECULATIVE.md): whether its next step drafts ({@link DraftSwitch}), the
 * speculative step itself (draft and verify in the pool, pick with {@link Decoding#verify}, roll back the rejected
 * rows), and the tokens it drafted and accepted. The one home of that logic for {@link Generator} (the CLI) and the
 * server's scheduler: a caller that does not draft a step runs a plain one and tells {@link #plainStep} what it took.
 */
public final class Drafting {

    /** When a sequence drafts. */
    public enum Use {
        /** Every decode step (tests, and benchmarks of the speculative step itself). */
        ALWAYS,
        /** While drafting pays for what it costs ({@link DraftSwitch}). */
        WHILE_PAYING
    }

    /**
     * What a lone sequence's steps take, plain and speculative, as moving averages over the steps of every sequence
     * of one pool (a property of the machine and the model, not of a conversation). The first step of each kind warms
     * up (the JIT, caches) and is not counted.
     */
    public static final class StepCost {
        private final Average plain = new Average();
        private final Average speculative = new Average();

        /** A speculative step takes this many plain steps' time; NaN until both kinds were measured. */
        public double ratio() {
            return speculative.nanos / plain.nanos;
        }

        /** While {@link #ratio} is unknown: whether a speculative step is to be measured next (else a plain one). */
        boolean needsSpeculative() {
            return speculative.steps <= plain.steps;
        }

        void speculative(long nanos) {
            speculative.add(nanos);
        }

        /** A plain decode step of one sequence alone took {@code nanos}. */
        public void plain(long nanos) {
            plain.add(nanos);
        }

        private static final class Average {
            double nanos = Double.NaN;
            int steps;

            void add(long newest) {
                if (steps++ == 0) {
                    return; // the warm-up
                }
                nanos = Double.isNaN(nanos) ? newest : (1 - DraftSwitch.NEWEST) * nanos + DraftSwitch.NEWEST * newest;
            }
        }
    }

    private final SequencePool pool;
    private final int drafts;
    private final SequencePool.DraftFilter filter;
    private final DraftSwitch draftSwitch;
    private final Use use;
    private final StepCost cost;
    private int drafted;
    private int accepted;

    /**
     * @param drafts tokens each speculative step drafts, 1 ≤ drafts ≤ {@link SequencePool#maxDrafts}
     * @param filter changes the drafts before they are verified ({@code bench --draft-accept}, tests); NONE otherwise
     * @param cost   the steps' cost, shared by the pool's sequences
     */
    public Drafting(SequencePool pool, int drafts, SequencePool.DraftFilter filter, Use use, StepCost cost) {
        if (drafts < 1 || drafts > pool.maxDrafts()) {
            throw new IllegalArgumentException(drafts + " drafts: the pool drafts at most " + pool.maxDrafts());
        }
        this.pool = pool;
        this.drafts = drafts;
        this.filter = filter;
        this.draftSwitch = new DraftSwitch(drafts);
        this.use = use;
        this.cost = cost;
    }

    /**
     * Whether the next step of the sequence {@code decoding} picks for is to be speculative. Never when the token limit
     * leaves one token: no draft could be kept.
     */
    public boolean draftNext(Decoding decoding) {
        if (decoding.tokensLeft() < 2) {
            return false;
        }
        return use == Use.ALWAYS || draftSwitch.draftNext(cost);
    }

    /**
     * A speculative step: {@code token} and its drafts into {@code sequence}, the picks made by {@code decoding}'s
     * rules for every row ({@link Decoding#verify}), and the rows of rejected drafts rolled back
     * ({@link SequencePool.Sequence#truncate}): the sequence then holds {@code token} and the accepted drafts.
     *
     * @return the picks in order (at least one); the last is the token to feed next unless it ends the sequence
     */
    public List<Decoding.Step> step(SequencePool.Sequence sequence, int token, Decoding decoding) {
        long start = System.nanoTime();
        int before = sequence.position();
        // No draft the token limit would not keep.
        int k = Math.min(drafts, decoding.tokensLeft() - 1);
        SequencePool.Speculation speculation = pool.speculate(sequence, token, k, decoding.readout(), filter);
        List<Decoding.Step> picks = decoding.verify(speculation, sequence.capacity() - before - 1);
        // Keep the token and the accepted drafts; the rows of the rejected ones are overwritten by the next run.
        sequence.truncate(before + picks.size());
        int[] tried = speculation.drafts();
        int kept = 0;
        while (kept < tried.length && kept < picks.size() && picks.get(kept).token() == tried[kept]) {
            kept++;
        }
        drafted += tried.length;
        accepted += kept;
        cost.speculative(System.nanoTime() - start);
        draftSwitch.drafted(1 + kept);
        return picks;
    }

    /** A plain decode step of this sequence alone took {@code nanos}: what a speculative step is compared with. */
    public void plainStep(long nanos) {
        cost.plain(nanos);
    }

    /** Tokens drafted so far. */
    public int drafted() {
        return drafted;
    }

    /** Drafts accepted so far. */
    public int accepted() {
        return accepted;
    }
}
