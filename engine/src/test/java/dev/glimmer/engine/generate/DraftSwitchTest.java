package dev.glimmer.engine.generate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The choice between speculative and plain steps from the time per token each gave. */
class DraftSwitchTest {

    /** Runs {@code steps} steps that take what the given costs say; returns how many drafted. */
    private static int run(DraftSwitch s, int steps, long speculativeNanos, int tokensPerSpeculative, long plainNanos) {
        int drafted = 0;
        for (int i = 0; i < steps; i++) {
            boolean draft = s.draftNext();
            if (draft) {
                drafted++;
                s.record(true, speculativeNanos, tokensPerSpeculative);
            } else {
                s.record(false, plainNanos, 1);
            }
        }
        return drafted;
    }

    @Test
    void draftsWhileTheyGiveMoreTokensPerSecond() {
        // 1.6 plain steps' time for 2 tokens (every draft accepted): drafting pays; plain steps only as probes.
        DraftSwitch paying = new DraftSwitch();
        int drafted = run(paying, 160, 160, 2, 100);
        assertTrue(drafted >= 160 - 160 / DraftSwitch.PROBE_EVERY - 2, "drafted " + drafted);
    }

    @Test
    void stopsDraftingWhenTheyDoNotPayAndTriesNowAndThen() {
        // 1.6 plain steps' time for 1 token (every draft rejected): plain steps, a speculative probe every 16.
        DraftSwitch losing = new DraftSwitch();
        int drafted = run(losing, 160, 160, 1, 100);
        assertTrue(drafted <= 3 + 160 / DraftSwitch.PROBE_EVERY + 1, "drafted " + drafted);
        assertTrue(drafted >= 160 / DraftSwitch.PROBE_EVERY, "still probing: drafted " + drafted);
    }

    @Test
    void followsAChangeOfAcceptance() {
        DraftSwitch s = new DraftSwitch();
        run(s, 64, 160, 1, 100); // drafts rejected: plain steps
        // From now on drafts are accepted: two probes see it and drafting comes back for good.
        int drafted = run(s, 128, 160, 2, 100);
        assertTrue(drafted > 80, "drafted " + drafted);
        assertEquals(16 - 1, run(s, 16, 160, 2, 100), "one plain probe in 16 steps");
    }
}
