package dev.glimmer.engine.generate;

/**
 * Whether a sequence's next decode step drafts: while its acceptance pays for what a speculative step costs. A
 * speculative step of d drafts gives 1 + (accepted drafts) tokens and costs {@link Drafting.StepCost#ratio} plain
 * steps (measured: ~2 on the CPU, where the drafted rows read other experts; little more than 1 on a GPU), so drafting
 * pays when the tokens per speculative step exceed that ratio. The tokens per step are a moving average over about the
 * last eight speculative steps (the window), starting from the acceptance published for GLM-4.7-Flash's block (~60 %
 * per draft), so that a conversation starts drafting only where that acceptance would pay, and one whose acceptance
 * stays low stops within the window: at acceptance 0 after at most 9 speculative steps (11 with two drafts), whatever
 * the cost.
 *
 * <p>Whichever kind it chose, it runs the other kind now and then (a probe) to see a change of acceptance or cost:
 * after 16 steps, then after twice as many as the last time up to 256, and after 16 again once the choice has turned.
 * At acceptance 0 a conversation thus drafts about one step in 256 once settled (on the CPU, where a speculative step
 * costs about two plain ones, well under 1 % slower than without drafts). The output is the same either way; only the
 * speed differs.
 */
final class DraftSwitch {
    /** Published first-draft acceptance of GLM-4.7-Flash's NextN block (vLLM: mean accepted length 1.6). */
    static final double PRIOR_ACCEPTANCE = 0.6;
    /** Weight of the newest speculative step in the average: a window of about the last eight. */
    static final double NEWEST = 0.25;
    /** Drafting must give this much more than it costs: the cost is a measurement of a noisy machine. */
    static final double MARGIN = 1.05;

    static final int FIRST_PROBE = 16;
    static final int LAST_PROBE = 256;

    private double tokensPerStep;
    private boolean drafting = true;
    private int sinceProbe;
    private int probeEvery = FIRST_PROBE;

    /** @param drafts tokens each speculative step drafts */
    DraftSwitch(int drafts) {
        // 1 + a + a² ...: a draft counts only when the ones before it were accepted.
        double expected = 1;
        double run = 1;
        for (int i = 0; i < drafts; i++) {
            run *= PRIOR_ACCEPTANCE;
            expected += run;
        }
        this.tokensPerStep = expected;
    }

    /** Whether the next step drafts, given what the steps cost ({@code cost}, shared by a pool's sequences). */
    boolean draftNext(Drafting.StepCost cost) {
        double ratio = cost.ratio();
        if (Double.isNaN(ratio)) {
            return cost.needsSpeculative(); // measure both kinds first
        }
        boolean pays = tokensPerStep > MARGIN * Math.max(1, ratio);
        if (pays != drafting) {
            drafting = pays;
            sinceProbe = 0;
            probeEvery = FIRST_PROBE;
        }
        if (++sinceProbe >= probeEvery) {
            sinceProbe = 0;
            probeEvery = Math.min(2 * probeEvery, LAST_PROBE);
            return !pays;
        }
        return pays;
    }

    /** A speculative step gave {@code tokens} tokens (1 + the drafts accepted). */
    void drafted(int tokens) {
        tokensPerStep = (1 - NEWEST) * tokensPerStep + NEWEST * tokens;
    }

    /** The moving average of the tokens a speculative step gives. */
    double tokensPerStep() {
        return tokensPerStep;
    }
}
