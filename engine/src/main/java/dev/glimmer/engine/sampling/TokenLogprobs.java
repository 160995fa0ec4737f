package dev.glimmer.engine.sampling;

import java.util.ArrayList;
import java.util.List;

/**
 * The log-probability of a chosen token and of the most likely alternatives, from the raw logits
 * (log-softmax before any sampling transformation, as OpenAI's {@code logprobs} reports them).
 *
 * @param token   the chosen token
 * @param logprob its log-probability
 * @param top     the {@code n} most likely tokens, most likely first (ties: lower id first)
 */
public record TokenLogprobs(int token, float logprob, List<Candidate> top) {

    /** One token and its log-probability. */
    public record Candidate(int token, float logprob) {}

    public static TokenLogprobs of(float[] logits, int vocabularySize, int token, int topN) {
        double max = Double.NEGATIVE_INFINITY;
        for (int i = 0; i < vocabularySize; i++) {
            if (logits[i] > max) {
                max = logits[i];
            }
        }
        double sum = 0;
        for (int i = 0; i < vocabularySize; i++) {
            sum += Math.exp(logits[i] - max);
        }
        double logZ = max + Math.log(sum);
        List<Candidate> top = new ArrayList<>(Math.max(0, topN));
        if (topN > 0) {
            int[] best = new int[Math.min(topN, vocabularySize)];
            int filled = 0;
            for (int i = 0; i < vocabularySize; i++) {
                // Insertion into a small sorted array: topN is at most 20 in the OpenAI API.
                if (filled < best.length || logits[i] > logits[best[filled - 1]]) {
                    int at = filled < best.length ? filled++ : filled - 1;
                    while (at > 0 && logits[i] > logits[best[at - 1]]) {
                        best[at] = best[at - 1];
                        at--;
                    }
                    best[at] = i;
                }
            }
            for (int i = 0; i < filled; i++) {
                top.add(new Candidate(best[i], (float) (logits[best[i]] - logZ)));
            }
        }
        return new TokenLogprobs(token, (float) (logits[token] - logZ), List.copyOf(top));
    }
}
