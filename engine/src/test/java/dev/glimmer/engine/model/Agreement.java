package dev.glimmer.engine.model;

import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * How closely our logits follow llama.cpp's on one reference case, teacher-forced: the prompt in one
 * batch (every position compared), then llama.cpp's greedy tokens fed one at a time (every step compared).
 *
 * @param positionDiffs max |Δ| of each compared position (prompt positions, then greedy steps)
 * @param argmaxAgreed  positions whose argmax equals llama.cpp's
 */
public record Agreement(String label, float[] positionDiffs, int argmaxAgreed) {

    public static Agreement teacherForced(GlmModel model, Oracle.Case c, KvCacheType cacheType) {
        int vocab = model.vocabSize();
        List<Float> diffs = new ArrayList<>();
        int agreed = 0;
        try (KvCache cache = new KvCache(model.config().layers(), model.config().kvRowWidth(), 256, cacheType)) {
            GlmForward forward = new GlmForward(model, new CpuBackend(), 64);
            float[] all = forward.forward(cache, c.promptTokens(), 0, c.promptTokens().length, true);
            for (int p = 0; p < c.promptTokens().length; p++) {
                diffs.add(Oracle.maxAbsDiff(all, p * vocab, c.promptLogits()[p], vocab));
                agreed += Oracle.argmax(all, p * vocab, vocab) == Oracle.argmax(c.promptLogits()[p], 0, vocab) ? 1 : 0;
            }
            for (int k = 0; k < c.greedyStepLogits().length; k++) {
                float[] logits = forward.forward(cache, c.greedyTokens(), k, 1, false);
                float[] expected = c.greedyStepLogits()[k];
                diffs.add(Oracle.maxAbsDiff(logits, 0, expected, vocab));
                agreed += Oracle.argmax(logits, 0, vocab) == Oracle.argmax(expected, 0, vocab) ? 1 : 0;
            }
        }
        float[] d = new float[diffs.size()];
        for (int i = 0; i < d.length; i++) {
            d[i] = diffs.get(i);
        }
        return new Agreement(c.name(), d, agreed);
    }

    /** Our free-running greedy continuation of the case's prompt (argmax, first maximum wins). */
    public static int[] greedy(GlmModel model, Oracle.Case c, KvCacheType cacheType, int count) {
        int vocab = model.vocabSize();
        int[] out = new int[count];
        try (KvCache cache = new KvCache(model.config().layers(), model.config().kvRowWidth(), 256, cacheType)) {
            GlmForward forward = new GlmForward(model, new CpuBackend(), 64);
            float[] logits = forward.forward(cache, c.promptTokens(), 0, c.promptTokens().length, false);
            for (int i = 0; i < count; i++) {
                out[i] = Oracle.argmax(logits, 0, vocab);
                if (i + 1 < count) {
                    logits = forward.forward(cache, out, i, 1, false);
                }
            }
        }
        return out;
    }

    public int positions() {
        return positionDiffs.length;
    }

    public double maxDiff() {
        double max = 0;
        for (float d : positionDiffs) {
            max = Math.max(max, d);
        }
        return max;
    }

    public double medianDiff() {
        float[] sorted = positionDiffs.clone();
        Arrays.sort(sorted);
        int n = sorted.length;
        return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
    }

    public double argmaxAgreement() {
        return (double) argmaxAgreed / positions();
    }

    @Override
    public String toString() {
        return String.format(
                "%s: %d positions, max |Δ| %.3g, median |Δ| %.3g, argmax agrees at %.1f%%",
                label, positions(), maxDiff(), medianDiff(), 100 * argmaxAgreement());
    }
}
