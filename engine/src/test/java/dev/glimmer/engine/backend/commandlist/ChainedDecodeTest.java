package dev.glimmer.engine.backend.commandlist;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.SequencePool.Readout;
import dev.glimmer.engine.backend.emulated.EmulatorRunner;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Greedy decode steps chained on the device ({@link CommandListPool#decode}: each step queued on the greedy token the
 * step before leaves there, its tokens read one step behind), on the kernel emulator (needs clang-19), give exactly
 * what the same steps one at a time give ({@link SequencePool#step}, then the pick): the same picks heard in the same
 * order, each with its sequence at the same position, the same logits where a row gets them (a greedy token it bans,
 * in the middle of a chain), for one sequence and for two stepping together; and a row that stops holds only the
 * tokens it was fed (its step run ahead discarded), so that going on from there gives the tokens of a run that never
 * stopped.
 */
public class ChainedDecodeTest {

    private static final String MODEL = "tiny-q4_0";
    /** Greedy steps of a run. */
    private static final int STEPS = 5;

    private static GlmModel model;
    private static Chains chains;

    @BeforeAll
    static void open() throws IOException {
        model = GlmModel.open(Oracle.model(MODEL));
        // one batch of the emulator's prompt list
        chains = new Chains(
                (slots, capacity) -> EmulatorRunner.pool(model, slots, capacity),
                Arrays.copyOf(Oracle.chatCase(MODEL).promptTokens(), EmulatorRunner.PROMPT_TOKENS));
    }

    @AfterAll
    static void close() {
        model.close();
    }

    @Test
    void oneSequenceChainedHearsWhatStepsOneAtATimeGive() {
        chains.oneSequence();
    }

    @Test
    void aBannedGreedyTokenInTheMiddleOfAChainGivesItsLogits() {
        chains.aBannedGreedyTokenInTheMiddle();
    }

    @Test
    void aStoppedRowGoesOnFromWhatItWasFed() {
        chains.aStoppedRowGoesOn();
    }

    @Test
    void twoSequencesChainedHearWhatStepsOneAtATimeGive() {
        chains.twoSequences();
    }

    /** Pools of a backend: {@code slots} sequences of {@code capacity} positions. */
    @FunctionalInterface
    public interface Pools {
        SequencePool pool(int slots, int capacity);
    }

    /** The checks, on the pools of any backend (the emulator here, CUDA in {@code CudaChainedDecodeTest}). */
    public static final class Chains {
        private final Pools pools;
        private final int[] prompt;
        /** One sequence's greedy run of {@link #STEPS} from the prompt, step by step: what the checks compare with. */
        private final List<Recorder.Heard> free;

        /** Checks of {@code pools}' runs after {@code prompt} (at least 2 tokens). */
        public Chains(Pools pools, int[] prompt) {
            this.pools = pools;
            this.prompt = prompt.clone();
            this.free = runOne(false, Readout.GREEDY);
        }

        /**
         * The prompt's first {@code cut} tokens into a new sequence of {@code pool}, greedy; gives the first token (the
         * prompt's greedy one).
         */
        private int prompted(SequencePool pool, SequencePool.Sequence sequence, int cut) {
            return pool.prompt(sequence, prompt, 0, cut, Readout.GREEDY).greedyToken();
        }

        /** One run of one sequence from the prompt, {@link #STEPS} picks: chained or step by step; what the picker heard. */
        private List<Recorder.Heard> runOne(boolean chained, Readout readout) {
            try (SequencePool pool = pools.pool(1, prompt.length + STEPS + 2);
                    SequencePool.Sequence q = pool.open()) {
                int first = prompted(pool, q, prompt.length);
                List<SequencePool.Sequence> one = List.of(q);
                Readout[] readouts = {readout};
                Recorder recorder = new Recorder(one, readouts, STEPS);
                if (chained) {
                    pool.decode(one, new int[] {first}, readouts, recorder);
                } else {
                    stepByStep(pool, one, new int[] {first}, readouts, recorder);
                }
                assertEquals(prompt.length + STEPS, q.position(), "the sequence holds the prompt and the tokens fed");
                return recorder.heard;
            }
        }

        private void assertSame(List<Recorder.Heard> expected, List<Recorder.Heard> got) {
            assertEquals(expected.toString(), got.toString(), "what the picker heard, in order");
            for (int i = 0; i < expected.size(); i++) {
                if (expected.get(i).logits() != null) {
                    assertTrue(
                            Arrays.equals(expected.get(i).logits(), got.get(i).logits()),
                            "logits of " + expected.get(i));
                }
            }
        }

        /** One sequence: chained, it hears what steps one at a time give. */
        public void oneSequence() {
            assertSame(free, runOne(true, Readout.GREEDY));
            assertTrue(free.stream().allMatch(h -> h.logits() == null));
        }

        /**
         * A token that is greedy in the middle of the run, banned: the chained step run ahead on it is discarded, the row
         * gets that step's logits (computed again: the step ahead has overwritten them) and goes on from its pick.
         */
        public void aBannedGreedyTokenInTheMiddle() {
            int banned = free.get(STEPS / 2).greedy();
            Readout banning = Readout.greedyBanning(new int[] {banned});
            List<Recorder.Heard> expected = runOne(false, banning);
            assertTrue(expected.stream().anyMatch(h -> h.logits() != null), "the ban changes the run: " + expected);
            assertSame(expected, runOne(true, banning));
        }

        /**
         * A row stopped after 3 picks holds the prompt and the 3 tokens fed (not the step run ahead of its stop); decoding
         * on from its last pick gives the tokens of a run that never stopped.
         */
        public void aStoppedRowGoesOn() {
            int[] whole = free.stream().mapToInt(Recorder.Heard::greedy).toArray();
            try (SequencePool pool = pools.pool(1, prompt.length + STEPS + 2);
                    SequencePool.Sequence q = pool.open()) {
                int first = prompted(pool, q, prompt.length);
                List<SequencePool.Sequence> one = List.of(q);
                Readout[] greedy = {Readout.GREEDY};
                Recorder head = new Recorder(one, greedy, 3);
                pool.decode(one, new int[] {first}, greedy, head);
                assertEquals(prompt.length + 3, q.position());
                Recorder tail = new Recorder(one, greedy, STEPS - 3);
                pool.decode(one, new int[] {head.picks(0)[2]}, greedy, tail);
                int[] got = new int[STEPS];
                System.arraycopy(head.picks(0), 0, got, 0, 3);
                System.arraycopy(tail.picks(0), 0, got, 3, STEPS - 3);
                assertEquals(Arrays.toString(whole), Arrays.toString(got));
            }
        }

        /**
         * Two sequences at different positions stepping together (the 2-row batch list): the second bans the greedy token
         * of its second step (as the sequence alone meets it), so that the two-row step chained on that one is discarded
         * and the step runs again for its logits; the first stops there, and the second goes on alone (the decode list).
         */
        public void twoSequences() {
            int banned = free.get(1).greedy();
            Readout banning = Readout.greedyBanning(new int[] {banned});
            List<Recorder.Heard> expected = twoRows(false, banning);
            assertTrue(expected.stream().anyMatch(h -> h.logits() != null), "the ban changes the run: " + expected);
            assertSame(expected, twoRows(true, banning));
        }

        private List<Recorder.Heard> twoRows(boolean chained, Readout second) {
            try (SequencePool pool = pools.pool(2, prompt.length + STEPS + 2);
                    SequencePool.Sequence a = pool.open();
                    SequencePool.Sequence b = pool.open()) {
                int[] first = {prompted(pool, a, prompt.length - 1), prompted(pool, b, prompt.length)};
                List<SequencePool.Sequence> both = List.of(a, b);
                Readout[] readouts = {Readout.GREEDY, second};
                Recorder recorder = new Recorder(both, readouts, 2, STEPS);
                if (chained) {
                    pool.decode(both, first, readouts, recorder);
                } else {
                    stepByStep(pool, both, first, readouts, recorder);
                }
                assertEquals(prompt.length - 1 + 2, a.position());
                assertEquals(prompt.length + STEPS, b.position());
                return recorder.heard;
            }
        }
    }

    /**
     * What a picker heard, in order: the row, its sequence's position then, the greedy token and the logits (null
     * when none came); it picks the greedy token, or the first maximum of the logits among the tokens the row does not
     * ban, and stops a row after {@code budget[row]} picks.
     */
    private static final class Recorder implements SequencePool.Picker {
        record Heard(int row, int position, int greedy, float[] logits) {
            @Override
            public String toString() {
                return "row " + row + " at " + position + ": greedy " + greedy + (logits == null ? "" : " with logits");
            }
        }

        final List<Heard> heard = new ArrayList<>();
        private final List<SequencePool.Sequence> sequences;
        private final Readout[] readouts;
        private final int[] budget;

        Recorder(List<SequencePool.Sequence> sequences, Readout[] readouts, int... budget) {
            this.sequences = sequences;
            this.readouts = readouts;
            this.budget = budget.clone();
        }

        @Override
        public int pick(int row, SequencePool.Next next) {
            float[] logits = next.logits() == null ? null : next.logits().clone();
            heard.add(new Heard(row, sequences.get(row).position(), next.greedyToken(), logits));
            int token = next.greedyToken();
            if (logits != null) {
                token = -1;
                for (int t = 0; t < logits.length; t++) {
                    if ((token < 0 || logits[t] > logits[token]) && !banned(row, t)) {
                        token = t;
                    }
                }
            }
            return --budget[row] > 0 ? token : SequencePool.STOP;
        }

        private boolean banned(int row, int token) {
            return Arrays.stream(readouts[row].banned()).anyMatch(b -> b == token);
        }

        /** The tokens picked for {@code row}, in order. */
        int[] picks(int row) {
            return heard.stream()
                    .filter(h -> h.row() == row)
                    .mapToInt(h -> h.logits() == null ? h.greedy() : pickFrom(h))
                    .toArray();
        }

        private int pickFrom(Heard h) {
            int token = -1;
            for (int t = 0; t < h.logits().length; t++) {
                if ((token < 0 || h.logits()[t] > h.logits()[token]) && !banned(h.row(), t)) {
                    token = t;
                }
            }
            return token;
        }
    }

    /** Decode steps one at a time through {@link SequencePool#step}: what {@code decode} does where nothing chains. */
    private static void stepByStep(
            SequencePool pool,
            List<SequencePool.Sequence> sequences,
            int[] tokens,
            Readout[] readouts,
            SequencePool.Picker picker) {
        List<Integer> rows = new ArrayList<>();
        for (int i = 0; i < sequences.size(); i++) {
            rows.add(i);
        }
        int[] feed = tokens.clone();
        while (!rows.isEmpty()) {
            SequencePool.Next[] next = pool.step(
                    rows.stream().map(sequences::get).toList(),
                    rows.stream().mapToInt(r -> feed[r]).toArray(),
                    rows.stream().map(r -> readouts[r]).toArray(Readout[]::new));
            List<Integer> going = new ArrayList<>();
            for (int k = 0; k < next.length; k++) {
                int token = picker.pick(rows.get(k), next[k]);
                if (token != SequencePool.STOP) {
                    feed[rows.get(k)] = token;
                    going.add(rows.get(k));
                }
            }
            rows = going;
        }
    }
}
