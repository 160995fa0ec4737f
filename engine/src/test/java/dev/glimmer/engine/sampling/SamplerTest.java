package dev.glimmer.engine.sampling;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.InvalidInputException;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class SamplerTest {

    static float[] randomLogits(int n, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        float[] logits = new float[n];
        for (int i = 0; i < n; i++) {
            logits[i] = (float) (r.nextGaussian() * 3);
        }
        return logits;
    }

    @Test
    void greedyBansAreTheMinusInfinityBiasesOfAGreedySampler() {
        int vocab = 8;
        SamplingParams greedy = SamplingParams.greedy();
        assertArrayEquals(new int[0], new Sampler(greedy, vocab).greedyBans());
        Sampler banning = new Sampler(greedy.withLogitBias(Map.of(3, Float.NEGATIVE_INFINITY)), vocab);
        assertArrayEquals(new int[] {3}, banning.greedyBans());
        // what the bans stand for: the first maximum among the other tokens
        float[] logits = {0, 1, 2, 5, 4, 4, 0, 0};
        assertEquals(4, banning.sample(logits));
        assertNull(new Sampler(greedy.withLogitBias(Map.of(3, -5f)), vocab).greedyBans(), "a finite bias");
        assertNull(new Sampler(greedy.withPenalties(1.1f, 0, 0, 64), vocab).greedyBans(), "penalties");
        assertNull(new Sampler(SamplingParams.defaults().withSeed(1), vocab).greedyBans(), "a draw");
    }

    @Test
    void greedyTakesTheFirstMaximum() {
        Sampler s = new Sampler(SamplingParams.greedy(), 5);
        assertEquals(1, s.sample(new float[] {0f, 3f, 1f, 3f, -1f}));
        assertEquals(2, s.sample(new float[] {Float.NaN, -1f, 2f, Float.NaN, 2f}));
    }

    @Test
    void greedyDoesNotModifyTheLogits() {
        float[] logits = randomLogits(100, 1);
        float[] copy = logits.clone();
        new Sampler(SamplingParams.defaults().withSeed(3), 100).sample(logits);
        assertEquals(java.util.Arrays.toString(copy), java.util.Arrays.toString(logits));
    }

    @Test
    void sameSeedSameTokensOtherSeedOtherTokens() {
        float[] logits = randomLogits(1000, 7);
        SamplingParams p = SamplingParams.defaults()
                .withTemperature(1.5f)
                .withTopK(0)
                .withTopP(1f)
                .withMinP(0f);
        int[] a = drawMany(new Sampler(p.withSeed(42), 1000), logits, 50);
        int[] b = drawMany(new Sampler(p.withSeed(42), 1000), logits, 50);
        int[] c = drawMany(new Sampler(p.withSeed(43), 1000), logits, 50);
        assertEquals(java.util.Arrays.toString(a), java.util.Arrays.toString(b));
        assertNotEquals(java.util.Arrays.toString(a), java.util.Arrays.toString(c));
    }

    static int[] drawMany(Sampler s, float[] logits, int n) {
        int[] out = new int[n];
        for (int i = 0; i < n; i++) {
            out[i] = s.sample(logits);
        }
        return out;
    }

    @Test
    void topKKeepsOnlyTheKBest() {
        float[] logits = randomLogits(500, 11);
        int[] order = java.util.stream.IntStream.range(0, 500)
                .boxed()
                .sorted((x, y) -> Float.compare(logits[y], logits[x]))
                .mapToInt(i -> i)
                .toArray();
        Set<Integer> best3 = Set.of(order[0], order[1], order[2]);
        Sampler s = new Sampler(
                SamplingParams.defaults()
                        .withTopK(3)
                        .withTopP(1f)
                        .withMinP(0f)
                        .withTemperature(5f)
                        .withSeed(1),
                500);
        Set<Integer> seen = new HashSet<>();
        for (int i = 0; i < 300; i++) {
            seen.add(s.sample(logits));
        }
        assertEquals(best3, seen, "a hot temperature over the 3 best must reach exactly those 3");
    }

    /** NaNs never enter the k best, even when the first k logits are NaN; of equal logits the lower id does. */
    @Test
    void topKSkipsNaNsAndBreaksTiesByTheLowerId() {
        float[] logits = {Float.NaN, Float.NaN, Float.NaN, 1f, 3f, Float.NaN, 3f, 2f, 3f, Float.NaN};
        Sampler s = new Sampler(
                SamplingParams.defaults()
                        .withTopK(3)
                        .withTopP(1f)
                        .withMinP(0f)
                        .withTemperature(5f)
                        .withSeed(2),
                logits.length);
        Set<Integer> seen = new HashSet<>();
        for (int i = 0; i < 300; i++) {
            seen.add(s.sample(logits));
        }
        assertEquals(Set.of(4, 6, 8), seen);
        Sampler two = new Sampler(
                SamplingParams.defaults()
                        .withTopK(2)
                        .withTopP(1f)
                        .withMinP(0f)
                        .withTemperature(5f)
                        .withSeed(3),
                logits.length);
        seen.clear();
        for (int i = 0; i < 300; i++) {
            seen.add(two.sample(logits));
        }
        assertEquals(Set.of(4, 6), seen, "of the three 3s, the two with the lowest ids");
    }

    @Test
    void topPKeepsTheSmallestSetReachingP() {
        // probabilities ~ 0.5, 0.3, 0.2 (logits are their logs)
        float[] logits = {(float) Math.log(0.5), (float) Math.log(0.3), (float) Math.log(0.2)};
        Sampler s = new Sampler(
                SamplingParams.defaults()
                        .withTopK(0)
                        .withMinP(0f)
                        .withTopP(0.7f)
                        .withTemperature(1f)
                        .withSeed(5),
                3);
        Set<Integer> seen = new HashSet<>();
        for (int i = 0; i < 500; i++) {
            seen.add(s.sample(logits));
        }
        assertEquals(Set.of(0, 1), seen);
    }

    @Test
    void minPDropsUnlikelyTokens() {
        float[] logits = {(float) Math.log(0.6), (float) Math.log(0.35), (float) Math.log(0.05)};
        Sampler s = new Sampler(
                SamplingParams.defaults()
                        .withTopK(0)
                        .withTopP(1f)
                        .withMinP(0.1f)
                        .withTemperature(1f)
                        .withSeed(9),
                3);
        Set<Integer> seen = new HashSet<>();
        for (int i = 0; i < 500; i++) {
            seen.add(s.sample(logits));
        }
        assertEquals(Set.of(0, 1), seen, "0.05 < 0.1 × 0.6 is dropped");
    }

    @Test
    void temperatureSharpensAndFlattens() {
        float[] logits = {1f, 0f};
        double cold = frequencyOfFirst(0.25f, logits);
        double hot = frequencyOfFirst(4f, logits);
        // exact: softmax(4, 0)[0] = 0.982, softmax(0.25, 0)[0] = 0.562
        assertTrue(Math.abs(cold - 0.982) < 0.02, "cold " + cold);
        assertTrue(Math.abs(hot - 0.562) < 0.03, "hot " + hot);
    }

    static double frequencyOfFirst(float temperature, float[] logits) {
        Sampler s = new Sampler(
                SamplingParams.defaults()
                        .withTopK(0)
                        .withTopP(1f)
                        .withMinP(0f)
                        .withTemperature(temperature)
                        .withSeed(123),
                2);
        int first = 0;
        int n = 4000;
        for (int i = 0; i < n; i++) {
            first += s.sample(logits) == 0 ? 1 : 0;
        }
        return first / (double) n;
    }

    @Test
    void logitBiasCanForceAndForbidTokens() {
        float[] logits = {5f, 0f, 0f};
        Sampler forced = new Sampler(SamplingParams.greedy().withLogitBias(Map.of(2, 100f)), 3);
        assertEquals(2, forced.sample(logits));
        Sampler banned = new Sampler(SamplingParams.greedy().withLogitBias(Map.of(0, Float.NEGATIVE_INFINITY)), 3);
        assertEquals(1, banned.sample(logits));
    }

    @Test
    void repetitionPenaltiesFollowLlamaCpp() {
        float[] logits = {2f, 1.9f, -1f};
        Sampler s = new Sampler(SamplingParams.greedy().withPenalties(1.1f, 0f, 0f, 64), 3);
        s.accept(0);
        assertEquals(1, s.sample(logits), "2/1.1 = 1.82 < 1.9");
        Sampler f = new Sampler(SamplingParams.greedy().withPenalties(1f, 0.05f, 0.1f, 64), 3);
        f.accept(1);
        f.accept(1);
        // token 1: 1.9 - 2*0.1 - 0.05 = 1.65; token 0 stays 2
        assertEquals(0, f.sample(logits));
        Sampler window = new Sampler(SamplingParams.greedy().withPenalties(2f, 0f, 0f, 1), 3);
        window.accept(0);
        window.accept(2); // pushes token 0 out of a window of one
        assertEquals(0, window.sample(logits));
    }

    @Test
    void badParametersAreClearErrors() {
        assertThrows(
                InvalidInputException.class, () -> SamplingParams.defaults().withTemperature(-1f));
        assertThrows(
                InvalidInputException.class, () -> SamplingParams.defaults().withTopP(0f));
        assertThrows(
                InvalidInputException.class, () -> SamplingParams.defaults().withTopK(-2));
        InvalidInputException e = assertThrows(
                InvalidInputException.class,
                () -> new Sampler(SamplingParams.greedy().withLogitBias(Map.of(10, 1f)), 5));
        assertTrue(e.getMessage().contains("beyond the vocabulary"), e.getMessage());
    }

    @Test
    void logprobsAreTheLogSoftmaxOfTheRawLogits() {
        float[] logits = {1f, 2f, 3f, 0.5f};
        TokenLogprobs lp = TokenLogprobs.of(logits, 4, 1, 2);
        double z = Math.log(Math.exp(1) + Math.exp(2) + Math.exp(3) + Math.exp(0.5));
        assertEquals(2 - z, lp.logprob(), 1e-6);
        assertEquals(2, lp.top().size());
        assertEquals(2, lp.top().get(0).token());
        assertEquals(3 - z, lp.top().get(0).logprob(), 1e-6);
        assertEquals(1, lp.top().get(1).token());
    }
}
