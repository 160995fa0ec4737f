package dev.glimmer.engine.sampling;

import dev.glimmer.engine.InvalidInputException;
import java.security.SecureRandom;
import java.util.Arrays;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * Picks the next token of one sequence from the model's logits, in llama.cpp's order:
 * logit bias, repetition penalties, then either greedy (temperature 0) or top-k → top-p → min-p →
 * temperature → a draw from the remaining distribution.
 *
 * <p>One sampler per sequence: it remembers the recent tokens for the penalties and owns the random
 * generator, so the same seed and the same logits give the same tokens. Scratch space is allocated
 * once; {@link #sample} allocates nothing.
 */
public final class Sampler {
    private final SamplingParams params;
    private final int vocabularySize;
    private final long seed;
    private final SplittableRandom random;

    private final float[] work;
    private final int[] candidates;
    private final long[] sortKeys;
    private final double[] probabilities;
    private final int[] recent;
    private final int[] counts;
    private int recentCount;
    private int recentNext;

    public Sampler(SamplingParams params, int vocabularySize) {
        this.params = params;
        this.vocabularySize = vocabularySize;
        for (int token : params.logitBias().keySet()) {
            if (token >= vocabularySize) {
                throw new InvalidInputException(
                        "logit_bias token id " + token + " is beyond the vocabulary (" + vocabularySize + " tokens)");
            }
        }
        this.seed = params.seed().orElseGet(() -> new SecureRandom().nextLong());
        this.random = new SplittableRandom(seed);
        this.work = new float[vocabularySize];
        this.candidates = new int[vocabularySize];
        this.sortKeys = new long[vocabularySize];
        this.probabilities = new double[vocabularySize];
        this.recent = new int[params.penaltyWindow()];
        this.counts = hasPenalties() ? new int[vocabularySize] : new int[0];
    }

    /** The seed in use (the given one, or the random one chosen when none was given). */
    public long seed() {
        return seed;
    }

    public SamplingParams params() {
        return params;
    }

    /** Picks the next token; {@code logits} is not modified. Call {@link #accept} with the token that is used. */
    public int sample(float[] logits) {
        return sample(logits, null);
    }

    /**
     * Picks the next token among those {@code allowed} (a bit mask over the vocabulary, bit
     * {@code t % 64} of word {@code t / 64} for token t; null allows all), as constrained decoding
     * needs: the others are out before anything else looks at the logits.
     */
    public int sample(float[] logits, long[] allowed) {
        if (logits.length < vocabularySize) {
            throw new IllegalArgumentException("expected " + vocabularySize + " logits, got " + logits.length);
        }
        System.arraycopy(logits, 0, work, 0, vocabularySize);
        for (Map.Entry<Integer, Float> bias : params.logitBias().entrySet()) {
            work[bias.getKey()] += bias.getValue();
        }
        applyPenalties();
        if (allowed != null) {
            mask(allowed);
        }
        if (params.isGreedy()) {
            return argmax(work, vocabularySize);
        }
        int n = topK();
        if (n == 0 || work[candidates[0]] == Float.NEGATIVE_INFINITY) {
            return argmax(work, vocabularySize);
        }
        n = topP(n);
        n = minP(n);
        return draw(n);
    }

    /**
     * The tokens this sampler bans when {@link #sample} returns the first maximum of the logits among all other
     * tokens (greedy, no repetition penalties, and a logit bias of only minus infinities, as {@code ignore_eos}
     * gives): then the logits' first maximum, where it is none of these, can stand in for the logits. Null when
     * the sampler does more than that.
     */
    public int[] greedyBans() {
        if (!params.isGreedy() || hasPenalties()) {
            return null;
        }
        int[] banned = new int[params.logitBias().size()];
        int n = 0;
        for (Map.Entry<Integer, Float> bias : params.logitBias().entrySet()) {
            if (bias.getValue() != Float.NEGATIVE_INFINITY) {
                return null;
            }
            banned[n++] = bias.getKey();
        }
        return banned;
    }

    /** Records a token of the sequence (prompt or generated) for the repetition penalties. */
    public void accept(int token) {
        if (recent.length == 0) {
            return;
        }
        recent[recentNext] = token;
        recentNext = (recentNext + 1) % recent.length;
        recentCount = Math.min(recentCount + 1, recent.length);
    }

    private void mask(long[] allowed) {
        for (int word = 0; word * 64 < vocabularySize; word++) {
            long refused = word < allowed.length ? ~allowed[word] : -1L;
            while (refused != 0) {
                int token = word * 64 + Long.numberOfTrailingZeros(refused);
                if (token >= vocabularySize) {
                    break;
                }
                work[token] = Float.NEGATIVE_INFINITY;
                refused &= refused - 1;
            }
        }
    }

    /** The index of the largest value; the first one wins ties; NaN never wins. */
    public static int argmax(float[] values, int n) {
        int best = 0;
        float bestValue = Float.NEGATIVE_INFINITY;
        boolean found = false;
        for (int i = 0; i < n; i++) {
            float v = values[i];
            if (v > bestValue || (!found && v == bestValue)) {
                best = i;
                bestValue = v;
                found = true;
            }
        }
        return best;
    }

    private boolean hasPenalties() {
        return params.penaltyWindow() > 0
                && (params.repeatPenalty() != 1f || params.presencePenalty() != 0f || params.frequencyPenalty() != 0f);
    }

    private void applyPenalties() {
        if (!hasPenalties() || recentCount == 0) {
            return;
        }
        for (int i = 0; i < recentCount; i++) {
            counts[recent[i]]++;
        }
        for (int i = 0; i < recentCount; i++) {
            int token = recent[i];
            int count = counts[token];
            if (count == 0) {
                continue; // already penalised (a repeated token in the window)
            }
            float logit = work[token];
            logit = logit <= 0 ? logit * params.repeatPenalty() : logit / params.repeatPenalty();
            work[token] = logit - count * params.frequencyPenalty() - params.presencePenalty();
            counts[token] = 0;
        }
    }

    /** Fills {@code candidates} with the k best token ids, best first (ties: lower id first); returns k. */
    private int topK() {
        int k = params.topK() == 0 ? vocabularySize : Math.min(params.topK(), vocabularySize);
        if (k == vocabularySize) {
            for (int i = 0; i < vocabularySize; i++) {
                candidates[i] = i;
            }
        } else {
            selectBest(k);
        }
        sortCandidates(k);
        int valid = k;
        while (valid > 1 && (Float.isNaN(work[candidates[valid - 1]]))) {
            valid--;
        }
        return valid;
    }

    /**
     * A bounded min-heap over the first k slots of {@code candidates}: O(n log k). The scan compares each logit with
     * the heap's worst alone (a later token never wins a tie, and a NaN never enters while the worst is a number):
     * on a full vocabulary this loop is most of a sampled token's host time.
     */
    private void selectBest(int k) {
        for (int i = 0; i < k; i++) {
            candidates[i] = i;
            siftUp(i);
        }
        float worst = work[candidates[0]];
        boolean worstIsNaN = Float.isNaN(worst);
        for (int i = k; i < vocabularySize; i++) {
            float logit = work[i];
            if (logit > worst || (worstIsNaN && !Float.isNaN(logit))) {
                candidates[0] = i;
                siftDown(0, k);
                worst = work[candidates[0]];
                worstIsNaN = Float.isNaN(worst);
            }
        }
    }

    /** True when token a ranks before token b: a higher logit, or the same logit and a lower id. */
    private boolean better(int a, int b) {
        float la = work[a];
        float lb = work[b];
        if (Float.isNaN(la)) {
            return false;
        }
        if (Float.isNaN(lb)) {
            return true;
        }
        return la > lb || (la == lb && a < b);
    }

    private void siftUp(int i) {
        while (i > 0) {
            int parent = (i - 1) / 2;
            if (!better(candidates[parent], candidates[i])) {
                break;
            }
            swap(parent, i);
            i = parent;
        }
    }

    private void siftDown(int i, int size) {
        while (true) {
            int left = 2 * i + 1;
            int worst = i;
            if (left < size && better(candidates[worst], candidates[left])) {
                worst = left;
            }
            if (left + 1 < size && better(candidates[worst], candidates[left + 1])) {
                worst = left + 1;
            }
            if (worst == i) {
                return;
            }
            swap(i, worst);
            i = worst;
        }
    }

    private void swap(int a, int b) {
        int t = candidates[a];
        candidates[a] = candidates[b];
        candidates[b] = t;
    }

    private void sortCandidates(int n) {
        // Sort packed (logit descending, id ascending) keys: no boxing, no comparator calls.
        for (int i = 0; i < n; i++) {
            int id = candidates[i];
            sortKeys[i] = ((long) descendingRank(work[id]) << 32 | id) ^ Long.MIN_VALUE;
        }
        Arrays.sort(sortKeys, 0, n);
        for (int i = 0; i < n; i++) {
            candidates[i] = (int) sortKeys[i];
        }
    }

    /** An unsigned 32-bit rank that grows as the logit falls; NaN ranks last. */
    private static int descendingRank(float logit) {
        if (Float.isNaN(logit)) {
            return -1;
        }
        int bits = Float.floatToIntBits(logit);
        int ascending = bits >= 0 ? bits ^ Integer.MIN_VALUE : ~bits;
        return ~ascending;
    }

    /** Softmax of the first n candidates' logits divided by {@code temperature} into {@code probabilities}. */
    private void softmax(int n, float temperature) {
        double max = work[candidates[0]];
        double sum = 0;
        for (int i = 0; i < n; i++) {
            double p = Math.exp((work[candidates[i]] - max) / temperature);
            probabilities[i] = p;
            sum += p;
        }
        for (int i = 0; i < n; i++) {
            probabilities[i] /= sum;
        }
    }

    private int topP(int n) {
        if (params.topP() >= 1f) {
            return n;
        }
        softmax(n, 1f);
        double cumulative = 0;
        for (int i = 0; i < n; i++) {
            cumulative += probabilities[i];
            if (cumulative >= params.topP()) {
                return i + 1;
            }
        }
        return n;
    }

    private int minP(int n) {
        if (params.minP() <= 0f) {
            return n;
        }
        float threshold = work[candidates[0]] + (float) Math.log(params.minP());
        int kept = 1;
        while (kept < n && work[candidates[kept]] >= threshold) {
            kept++;
        }
        return kept;
    }

    /** One of the first n candidates, drawn in proportion to its probability with one random number. */
    private int draw(int n) {
        softmax(n, params.temperature());
        double u = random.nextDouble();
        double cumulative = 0;
        for (int i = 0; i < n; i++) {
            cumulative += probabilities[i];
            if (u < cumulative) {
                return candidates[i];
            }
        }
        return candidates[n - 1];
    }
}
