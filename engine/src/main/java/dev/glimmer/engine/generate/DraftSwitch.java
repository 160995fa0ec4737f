package dev.glimmer.engine.generate;

/**
 * Whether the next decode step of a sequence drafts: drafts are used while they pay. A speculative step costs more
 * than a plain one (on the CPU the drafted row's experts are read too: ~1.6 plain steps for one draft), so with few
 * drafts accepted it is slower per token. This keeps, for each kind of step, a moving average of the time per token
 * it gave, takes the kind that is faster, and now and then runs the other once to keep its figure fresh (acceptance
 * and load change along a generation). The output is the same either way; only the speed differs.
 */
final class DraftSwitch {
    /** Every this many steps, one of the kind not chosen. */
    static final int PROBE_EVERY = 16;
    /** Weight of the newest step in the moving averages: high, so that two probes can turn the choice. */
    private static final double NEWEST = 0.5;

    private double speculativeNanosPerToken = Double.NaN;
    private double plainNanosPerToken = Double.NaN;
    private int steps;

    /** Whether the next step drafts. */
    boolean draftNext() {
        steps++;
        if (Double.isNaN(speculativeNanosPerToken)) {
            return true;
        }
        if (Double.isNaN(plainNanosPerToken)) {
            // A few speculative steps first (the JIT, the first drafts), then one plain step to compare with.
            return steps % 4 != 0;
        }
        boolean draftsPay = speculativeNanosPerToken <= plainNanosPerToken;
        return steps % PROBE_EVERY == 0 ? !draftsPay : draftsPay;
    }

    /** Records a step: whether it drafted, how long it took, how many tokens it gave. */
    void record(boolean drafted, long nanos, int tokens) {
        double perToken = (double) nanos / Math.max(1, tokens);
        if (drafted) {
            speculativeNanosPerToken = average(speculativeNanosPerToken, perToken);
        } else {
            plainNanosPerToken = average(plainNanosPerToken, perToken);
        }
    }

    private static double average(double old, double newest) {
        return Double.isNaN(old) ? newest : (1 - NEWEST) * old + NEWEST * newest;
    }
}
