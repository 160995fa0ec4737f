package dev.glimmer.engine.sampling;

import dev.glimmer.engine.InvalidInputException;
import java.util.Map;
import java.util.OptionalLong;

/**
 * How to pick the next token. Defaults are llama-server's, so clients see the behaviour they know.
 *
 * @param temperature      0 (or less) means greedy: the first maximum wins
 * @param topK             keep the k most likely tokens; 0 keeps all
 * @param topP             keep the smallest set whose probability reaches p; 1 keeps all
 * @param minP             drop tokens less likely than minP × the most likely one; 0 keeps all
 * @param seed             same seed and same input give the same output; empty for a random seed
 * @param repeatPenalty    divides positive (multiplies negative) logits of recently seen tokens; 1 is off
 * @param presencePenalty  subtracted once from the logit of every recently seen token
 * @param frequencyPenalty subtracted per occurrence of a recently seen token
 * @param penaltyWindow    how many recent tokens the penalties look at
 * @param logitBias        added to the logit of the given token ids before anything else
 */
public record SamplingParams(
        float temperature,
        int topK,
        float topP,
        float minP,
        OptionalLong seed,
        float repeatPenalty,
        float presencePenalty,
        float frequencyPenalty,
        int penaltyWindow,
        Map<Integer, Float> logitBias) {

    public static final float DEFAULT_TEMPERATURE = 0.8f;
    public static final int DEFAULT_TOP_K = 40;
    public static final float DEFAULT_TOP_P = 0.95f;
    public static final float DEFAULT_MIN_P = 0.05f;
    public static final int DEFAULT_PENALTY_WINDOW = 64;

    public SamplingParams {
        check(Float.isFinite(temperature) && temperature >= 0, "temperature must be >= 0, got " + temperature);
        check(topK >= 0, "top_k must be >= 0, got " + topK);
        check(topP > 0 && topP <= 1, "top_p must be in (0, 1], got " + topP);
        check(minP >= 0 && minP <= 1, "min_p must be in [0, 1], got " + minP);
        check(Float.isFinite(repeatPenalty) && repeatPenalty > 0, "repeat_penalty must be > 0, got " + repeatPenalty);
        check(
                Float.isFinite(presencePenalty) && Math.abs(presencePenalty) <= 2,
                "presence_penalty must be in [-2, 2], got " + presencePenalty);
        check(
                Float.isFinite(frequencyPenalty) && Math.abs(frequencyPenalty) <= 2,
                "frequency_penalty must be in [-2, 2], got " + frequencyPenalty);
        check(penaltyWindow >= 0, "the penalty window must be >= 0, got " + penaltyWindow);
        logitBias = Map.copyOf(logitBias);
        for (Map.Entry<Integer, Float> e : logitBias.entrySet()) {
            check(e.getKey() >= 0, "logit_bias token id must be >= 0, got " + e.getKey());
            check(!Float.isNaN(e.getValue()), "logit_bias for token " + e.getKey() + " is not a number");
        }
    }

    /** llama-server's defaults with a random seed. */
    public static SamplingParams defaults() {
        return new SamplingParams(
                DEFAULT_TEMPERATURE,
                DEFAULT_TOP_K,
                DEFAULT_TOP_P,
                DEFAULT_MIN_P,
                OptionalLong.empty(),
                1f,
                0f,
                0f,
                DEFAULT_PENALTY_WINDOW,
                Map.of());
    }

    /** Always the most likely token (first maximum wins). */
    public static SamplingParams greedy() {
        return defaults().withTemperature(0);
    }

    public boolean isGreedy() {
        return temperature <= 0;
    }

    // One wither per field (records have none); each copies the others.
    public SamplingParams withTemperature(float t) {
        return new SamplingParams(
                t, topK, topP, minP, seed, repeatPenalty, presencePenalty, frequencyPenalty, penaltyWindow, logitBias);
    }

    public SamplingParams withTopK(int k) {
        return new SamplingParams(
                temperature,
                k,
                topP,
                minP,
                seed,
                repeatPenalty,
                presencePenalty,
                frequencyPenalty,
                penaltyWindow,
                logitBias);
    }

    public SamplingParams withTopP(float p) {
        return new SamplingParams(
                temperature,
                topK,
                p,
                minP,
                seed,
                repeatPenalty,
                presencePenalty,
                frequencyPenalty,
                penaltyWindow,
                logitBias);
    }

    public SamplingParams withMinP(float p) {
        return new SamplingParams(
                temperature,
                topK,
                topP,
                p,
                seed,
                repeatPenalty,
                presencePenalty,
                frequencyPenalty,
                penaltyWindow,
                logitBias);
    }

    public SamplingParams withSeed(long s) {
        return new SamplingParams(
                temperature,
                topK,
                topP,
                minP,
                OptionalLong.of(s),
                repeatPenalty,
                presencePenalty,
                frequencyPenalty,
                penaltyWindow,
                logitBias);
    }

    public SamplingParams withPenalties(float repeat, float presence, float frequency, int window) {
        return new SamplingParams(temperature, topK, topP, minP, seed, repeat, presence, frequency, window, logitBias);
    }

    public SamplingParams withLogitBias(Map<Integer, Float> bias) {
        return new SamplingParams(
                temperature,
                topK,
                topP,
                minP,
                seed,
                repeatPenalty,
                presencePenalty,
                frequencyPenalty,
                penaltyWindow,
                bias);
    }

    private static void check(boolean ok, String message) {
        if (!ok) {
            throw new InvalidInputException(message);
        }
    }
}
