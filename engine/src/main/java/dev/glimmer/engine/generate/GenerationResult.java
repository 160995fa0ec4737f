package dev.glimmer.engine.generate;

/**
 * The outcome of a generation.
 *
 * @param text    the generated text, without a matched stop string or end-of-generation token
 * @param tokens  the generated token ids (an end-of-generation token included)
 * @param finish  why it ended
 * @param timings how long it took
 * @param drafts  the tokens drafted and accepted by speculative steps (none without drafting)
 */
public record GenerationResult(String text, int[] tokens, FinishReason finish, Timings timings, Drafts drafts) {

    public GenerationResult(String text, int[] tokens, FinishReason finish, Timings timings) {
        this(text, tokens, finish, timings, Drafts.NONE);
    }

    /** Drafted tokens and how many of them were accepted. */
    public record Drafts(int drafted, int accepted) {
        public static final Drafts NONE = new Drafts(0, 0);

        /** The share of drafts accepted, 0 without drafts. */
        public double acceptance() {
            return drafted == 0 ? 0 : (double) accepted / drafted;
        }
    }
}
