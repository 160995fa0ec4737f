package dev.glimmer.engine.generate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The choice between speculative and plain steps: drafting while the tokens it gives pay for what it costs. */
class DraftSwitchTest {

    /** A step cost where a speculative step takes {@code ratio} plain steps' time (after the warm-up steps). */
    private static Drafting.StepCost cost(double ratio) {
        Drafting.StepCost cost = new Drafting.StepCost();
        for (int i = 0; i < 2; i++) {
            cost.plain(1000);
            cost.speculative(Math.round(1000 * ratio));
        }
        return cost;
    }

    /** Runs {@code steps} steps, a speculative one giving {@code tokens}; returns how many drafted. */
    private static int run(DraftSwitch s, Drafting.StepCost cost, int steps, int tokens) {
        int drafted = 0;
        for (int i = 0; i < steps; i++) {
            if (s.draftNext(cost)) {
                drafted++;
                s.drafted(tokens);
            }
        }
        return drafted;
    }

    @Test
    void measuresBothKindsOfStepFirst() {
        Drafting.StepCost cost = new Drafting.StepCost();
        DraftSwitch s = new DraftSwitch(1);
        // warm-up and one counted step of each kind, speculative first
        boolean[] expected = {true, false, true, false};
        for (boolean draft : expected) {
            assertEquals(draft, s.draftNext(cost));
            if (draft) {
                cost.speculative(1100);
            } else {
                cost.plain(1000);
            }
        }
        assertEquals(1.1, cost.ratio(), 1e-9);
    }

    @Test
    void draftsWhileTheAcceptedDraftsPayForTheStep() {
        // A GPU-like step (1.1 plain steps) with every draft accepted: drafting, plain steps only as rarer probes.
        DraftSwitch paying = new DraftSwitch(1);
        int drafted = run(paying, cost(1.1), 1000, 2);
        assertTrue(drafted >= 1000 - 10, "drafted " + drafted);
        assertTrue(drafted < 1000, "probes plain steps now and then");
    }

    @Test
    void startsOnlyWhereThePublishedAcceptanceWouldPay() {
        // A CPU-like step (two plain steps): 1.6 tokens at the published acceptance do not pay for it.
        assertEquals(0, run(new DraftSwitch(1), cost(2.0), 15, 2));
        // A GPU-like one: they do.
        assertEquals(15, run(new DraftSwitch(1), cost(1.1), 15, 2));
    }

    @Test
    void acceptanceZeroStopsWithinTheWindowAndThenProbesRarely() {
        // Even where a speculative step costs no more than a plain one, drafts never accepted stop within 9 steps
        // (11 with two drafts), then one probe after 16 plain steps, 32, 64, ... 256.
        for (int drafts = 1; drafts <= 2; drafts++) {
            DraftSwitch s = new DraftSwitch(drafts);
            Drafting.StepCost cost = cost(1.0);
            int window = run(s, cost, 16, 1);
            assertEquals(drafts == 1 ? 9 : 11, window, drafts + " drafts");
            int later = run(s, cost, 2000, 1);
            // probes at 16, 32, 64, 128, 256, 256, ...: 5 + (2000 - 496) / 256
            assertTrue(later >= 9 && later <= 11, "probes in 2000 steps: " + later);
        }
    }

    @Test
    void followsAChangeOfAcceptance() {
        DraftSwitch s = new DraftSwitch(1);
        Drafting.StepCost cost = cost(1.1);
        run(s, cost, 100, 1); // drafts rejected: plain steps
        // From now on drafts are accepted: the next probes see it and drafting comes back.
        int drafted = run(s, cost, 200, 2);
        assertTrue(drafted > 100, "drafted " + drafted);
        assertEquals(16, run(s, cost, 16, 2), "drafting for good");
    }
}
