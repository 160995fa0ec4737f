package dev.glimmer.engine.model;

import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.tensor.GgmlType;
import dev.glimmer.engine.tensor.VecDot;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Explains where our teacher-forced logits leave llama.cpp's by more than {@link #THRESHOLD}. It finds the
 * first position where they leave llama.cpp's at all (beyond {@link #AGREED}; agreement is ~1e-6 otherwise),
 * lists the near-ties of that token's forward pass (activations close to a Q8 rounding boundary of the
 * matmul that consumes them, Q8_0 block scales close to an fp16 rounding midpoint, router scores close
 * to the boundary between the last chosen and the first unchosen expert) and re-runs the case with
 * near-ties decided the other way. When that brings the position back to llama.cpp's logits, the
 * divergence is explained: the decision is kept and the next divergent position is examined, until
 * none is beyond the threshold. Otherwise the position is reported as unexplained.
 */
final class NearTieExplainer {
    static final double THRESHOLD = 1e-2;
    /** Agreement when nothing rounds differently is ~1e-6; beyond this a position has diverged. */
    static final double AGREED = 1e-4;
    /** Near-ties considered: quant margins (in quantization steps) and router gaps below this. */
    private static final double CANDIDATE_MARGIN = 2e-3;

    private static final int MAX_DEPTH = 2;
    private static final int MAX_CANDIDATES = 16;
    private static final int PAIR_CANDIDATES = 6;

    /**
     * A decision taken the other way: element {@code index} of row {@code row} of intermediate
     * {@code name} in layer {@code layer}, during forward call {@code call} (0 = the prompt, k = greedy step k-1).
     *
     * @param margin distance to the boundary: in quantization steps (of 0.5 at most), or the router score gap
     */
    record Tie(String kind, int call, String name, int layer, int row, int index, double margin, double scale) {
        @Override
        public String toString() {
            return String.format(
                    "%s tie in %s-%d, element %d: margin %.3g %s",
                    kind,
                    name,
                    layer,
                    index,
                    margin,
                    switch (kind) {
                        case "router" -> "(score gap between the last chosen expert and the next)";
                        case "q8_0 scale" ->
                            String.format("(of an fp16 step of the block scale; %.3g relative)", margin / scale);
                        default ->
                            String.format(
                                    "(of a quantization step; %.3g of the block's largest value)", margin / scale);
                    });
        }
    }

    /** A divergent position and the near-ties that explain it. */
    record Explanation(int position, double diffBefore, double diffAfter, List<Tie> ties) {
        double margin() {
            return ties.stream().mapToDouble(Tie::margin).max().orElseThrow();
        }

        @Override
        public String toString() {
            return String.format(
                    "position %d: |Δ| %.3g -> %.3g when deciding the other way: %s",
                    position, diffBefore, diffAfter, ties);
        }
    }

    /**
     * @param explanations        the divergences explained, in order (the first is the root of the case's divergence)
     * @param unexplainedPosition where the search stopped without a full explanation, or -1 when none is left
     * @param diffsAfter          the diffs per position with the explained ties decided the other way
     */
    record Result(List<Explanation> explanations, int unexplainedPosition, float[] diffsAfter) {
        boolean complete() {
            return unexplainedPosition < 0;
        }
    }

    private final GlmModel model;
    private final Oracle.Case c;
    private final Map<String, List<Segment>> inputs = new HashMap<>();

    /** A piece of an intermediate's row that one matmul quantizes as a vector of its own. */
    private record Segment(int offset, int length, GgmlType activationType) {}

    NearTieExplainer(GlmModel model, Oracle.Case c) {
        this.model = model;
        this.c = c;
        GlmConfig cfg = model.config();
        for (int il = 0; il < cfg.layers(); il++) {
            GlmWeights.Layer l = model.weights().layers().get(il);
            consumer("attn_norm", il, 0, cfg.embedding(), l.qA() != null ? l.qA() : l.q(), l.kvA());
            if (l.qA() != null) {
                consumer("q_a_norm", il, 0, cfg.qLoraRank(), l.q());
            }
            for (int h = 0; h < cfg.heads(); h++) {
                consumer("q", il, h * cfg.keyLengthMla(), cfg.nopeDims(), l.kB()[h]);
                consumer("kqv_latent", il, h * cfg.kvLoraRank(), cfg.kvLoraRank(), l.vB()[h]);
            }
            consumer("kqv_out", il, 0, cfg.heads() * cfg.valueLengthMla(), l.attnOutput());
            if (l.dense() != null) {
                consumer(
                        "ffn_norm",
                        il,
                        0,
                        cfg.embedding(),
                        l.dense().gate(),
                        l.dense().up());
                consumer("ffn_swiglu", il, 0, l.dense().down().cols(), l.dense().down());
            } else {
                consumer(
                        "ffn_norm",
                        il,
                        0,
                        cfg.embedding(),
                        l.moe().router(),
                        l.moe().experts()[0].gate(),
                        l.moe().experts()[0].up());
                for (int x = 0; x < cfg.experts(); x++) {
                    GlmWeights.Ffn expert = l.moe().experts()[x];
                    consumer("ffn_moe_swiglu_" + x, il, 0, expert.down().cols(), expert.down());
                }
                if (l.moe().shared() != null) {
                    consumer(
                            "ffn_norm",
                            il,
                            0,
                            cfg.embedding(),
                            l.moe().shared().gate(),
                            l.moe().shared().up());
                    consumer(
                            "ffn_shexp_swiglu",
                            il,
                            0,
                            l.moe().shared().down().cols(),
                            l.moe().shared().down());
                }
            }
        }
        consumer("result_norm", -1, 0, cfg.embedding(), model.weights().output());
    }

    private void consumer(String name, int layer, int offset, int length, WeightMatrix... weights) {
        for (WeightMatrix w : weights) {
            GgmlType type = VecDot.vecDotType(w.type());
            List<Segment> list = inputs.computeIfAbsent(name + "/" + layer, k -> new ArrayList<>());
            Segment s = new Segment(offset, length, type);
            if ((type == GgmlType.Q8_0 || type == GgmlType.Q8_K) && !list.contains(s)) {
                list.add(s);
            }
        }
    }

    Result explain() {
        List<Tie> decided = new ArrayList<>();
        List<Explanation> explanations = new ArrayList<>();
        Run run = run(decided, true);
        while (true) {
            if (firstBeyond(run.diffs, THRESHOLD) < 0) {
                return new Result(explanations, -1, run.diffs);
            }
            // The divergence starts where the logits first leave llama.cpp's at all (it may grow later).
            int p = firstBeyond(run.diffs, AGREED);
            Explanation found = search(decided, run, p);
            if (found == null) {
                return new Result(explanations, p, run.diffs);
            }
            explanations.add(found);
            decided.addAll(found.ties());
            run = run(decided, true);
        }
    }

    /**
     * Greedy search at position {@code p}: the closest near-ties decided the other way, alone and in pairs; keep the
     * choice that brings p closest to llama.cpp, and look again from there (deciding a tie moves the values after it).
     * Pairs matter: two ties of one quantized row (say two elements of one attention head's output) can each move the
     * logits further from llama.cpp's alone, through a router downstream, and bring them back only together.
     * Null when no near-ties found this way bring p back to llama.cpp's logits.
     */
    private Explanation search(List<Tie> decided, Run run, int p) {
        List<Tie> chosen = new ArrayList<>();
        double best = run.diffs[p];
        Run current = run;
        for (int depth = 0; depth < MAX_DEPTH && best > AGREED; depth++) {
            List<List<Tie>> trials = trials(nearTies(current, p));
            List<Tie> bestTrial = null;
            for (List<Tie> ties : trials) {
                List<Tie> trial = new ArrayList<>(decided);
                trial.addAll(chosen);
                trial.addAll(ties);
                double diff = run(trial, false).diffs[p];
                if (diff < best) {
                    best = diff;
                    bestTrial = ties;
                }
                if (diff <= AGREED) {
                    break;
                }
            }
            if (bestTrial == null) {
                break;
            }
            chosen.addAll(bestTrial);
            List<Tie> sofar = new ArrayList<>(decided);
            sofar.addAll(chosen);
            current = run(sofar, true);
        }
        return best <= AGREED ? new Explanation(p, run.diffs[p], best, List.copyOf(chosen)) : null;
    }

    /** The closest {@link #MAX_CANDIDATES} ties one by one, then every pair of the closest {@link #PAIR_CANDIDATES}. */
    private static List<List<Tie>> trials(List<Tie> candidates) {
        List<List<Tie>> trials = new ArrayList<>();
        for (Tie tie : candidates.subList(0, Math.min(MAX_CANDIDATES, candidates.size()))) {
            trials.add(List.of(tie));
        }
        int pairs = Math.min(PAIR_CANDIDATES, candidates.size());
        for (int i = 0; i < pairs; i++) {
            for (int j = i + 1; j < pairs; j++) {
                trials.add(List.of(candidates.get(i), candidates.get(j)));
            }
        }
        return trials;
    }

    private static int firstBeyond(float[] diffs, double threshold) {
        for (int i = 0; i < diffs.length; i++) {
            if (diffs[i] > threshold) {
                return i;
            }
        }
        return -1;
    }

    /** Forward call and row of position {@code p}. */
    private int callOf(int p) {
        int prompt = c.promptTokens().length;
        return p < prompt ? 0 : p - prompt + 1;
    }

    private int rowOf(int p) {
        int prompt = c.promptTokens().length;
        return p < prompt ? p : 0;
    }

    /** The near-ties of position {@code p}'s forward pass, closest first. */
    private List<Tie> nearTies(Run run, int p) {
        int call = callOf(p);
        int row = rowOf(p);
        int k = model.config().expertsUsed();
        List<Tie> ties = new ArrayList<>();
        for (Map.Entry<String, float[]> e : run.recorded.get(call).entrySet()) {
            String[] key = e.getKey().split("/");
            String name = key[0];
            int layer = Integer.parseInt(key[1]);
            int width = run.widths.get(e.getKey());
            float[] v = e.getValue();
            if (name.equals("ffn_moe_probs_biased") || name.equals("ffn_moe_selection")) {
                float[] s = Arrays.copyOfRange(v, row * width, row * width + width);
                float[] sorted = s.clone();
                Arrays.sort(sorted);
                double gap = sorted[width - k] - sorted[width - k - 1];
                if (gap < CANDIDATE_MARGIN) {
                    ties.add(new Tie("router", call, name, layer, row, -1, gap, 1));
                }
                continue;
            }
            int r = name.startsWith("ffn_moe_swiglu_") ? expertRow(run.recorded.get(call), name, layer, row) : row;
            if (r < 0) {
                continue;
            }
            for (Segment seg : inputs.getOrDefault(e.getKey(), List.of())) {
                int block = seg.activationType().blockSize;
                int base = r * width + seg.offset();
                for (int b = 0; b < seg.length() / block; b++) {
                    if (seg.activationType() == GgmlType.Q8_0) {
                        // The block's scale is stored as fp16: amax/127 close to the midpoint of two fp16 values.
                        int maxAt = maxAbsIndex(v, base + b * block, block);
                        double margin = fp16Margin(Math.abs(v[base + b * block + maxAt]) / 127f);
                        if (margin < CANDIDATE_MARGIN) {
                            ties.add(new Tie(
                                    "q8_0 scale",
                                    call,
                                    name,
                                    layer,
                                    r,
                                    seg.offset() + b * block + maxAt,
                                    margin,
                                    1024));
                        }
                    }
                    float scale = quantScale(v, base + b * block, block, seg.activationType());
                    for (int j = 0; j < block; j++) {
                        int index = seg.offset() + b * block + j;
                        float q = v[base + b * block + j] * scale;
                        double margin = Math.abs(q - Math.floor(q) - 0.5);
                        if (margin < CANDIDATE_MARGIN) {
                            ties.add(new Tie(
                                    seg.activationType().ggmlName() + " rounding",
                                    call,
                                    name,
                                    layer,
                                    r,
                                    index,
                                    margin,
                                    127));
                        }
                    }
                }
            }
        }
        ties.sort(Comparator.comparingDouble((Tie t) -> t.kind().equals("router") ? 0 : 1)
                .thenComparingDouble(Tie::margin));
        return ties;
    }

    /**
     * The row of token {@code tokenRow} among the rows an expert computed ({@code ffn_moe_swiglu_<expert>}):
     * the forward pass gathers the tokens that chose the expert in token order; -1 when the token did not.
     */
    private int expertRow(Map<String, float[]> call, String name, int layer, int tokenRow) {
        int expert = Integer.parseInt(name.substring("ffn_moe_swiglu_".length()));
        float[] topk = call.get("ffn_moe_topk/" + layer);
        int k = model.config().expertsUsed();
        int r = 0;
        for (int t = 0; t < topk.length / k; t++) {
            for (int s = 0; s < k; s++) {
                if ((int) topk[t * k + s] == expert) {
                    if (t == tokenRow) {
                        return r;
                    }
                    r++;
                }
            }
        }
        return -1;
    }

    private static int maxAbsIndex(float[] v, int off, int n) {
        int best = 0;
        for (int j = 1; j < n; j++) {
            if (Math.abs(v[off + j]) > Math.abs(v[off + best])) {
                best = j;
            }
        }
        return best;
    }

    /** How far {@code d} is from the midpoint between its two fp16 neighbours, in fp16 steps (0.5 at most). */
    private static double fp16Margin(float d) {
        short h = Float.floatToFloat16(d);
        float rounded = Float.float16ToFloat(h);
        if (rounded == d || d == 0) {
            return 0.5;
        }
        float neighbour = Float.float16ToFloat((short) (h + (rounded < d ? 1 : -1)));
        return Math.abs(Math.abs(d - rounded) / Math.abs(neighbour - rounded) - 0.5);
    }

    // Written apart from Q8_0's and Q8_K's quantizers on purpose: the explainer checks what they round.
    /** The multiplier that maps a block's values to quantization steps, as llama.cpp's CPU backend computes it. */
    private static float quantScale(float[] v, int off, int n, GgmlType type) {
        float amax = 0;
        float max = 0;
        for (int j = 0; j < n; j++) {
            float a = Math.abs(v[off + j]);
            if (a > amax) {
                amax = a;
                max = v[off + j];
            }
        }
        if (amax == 0) {
            return 0;
        }
        return type == GgmlType.Q8_K ? -127f / max : 127f / amax;
    }

    /** Moves a value just across its rounding boundary, or swaps the router's last chosen and first unchosen expert. */
    private void decideOtherWay(Tie tie, int width, float[] values) {
        int rowStart = tie.row() * width;
        if (tie.kind().equals("router")) {
            int k = model.config().expertsUsed();
            Integer[] order = new Integer[width];
            for (int i = 0; i < width; i++) {
                order[i] = i;
            }
            Arrays.sort(order, (a, b) -> Float.compare(values[rowStart + b], values[rowStart + a]));
            int last = rowStart + order[k - 1];
            int next = rowStart + order[k];
            float t = values[last];
            values[last] = values[next];
            values[next] = t;
            return;
        }
        List<Segment> segments = inputs.get(tie.name() + "/" + tie.layer());
        Segment seg = segments.stream()
                .filter(s -> tie.index() >= s.offset() && tie.index() < s.offset() + s.length())
                .filter(s -> tie.kind().startsWith(s.activationType().ggmlName()))
                .findFirst()
                .orElseThrow();
        int block = seg.activationType().blockSize;
        int blockStart = rowStart + seg.offset() + (tie.index() - seg.offset()) / block * block;
        int i = rowStart + tie.index();
        if (tie.kind().equals("q8_0 scale")) {
            // Move the block's largest value so that amax/127 rounds to the other fp16 neighbour.
            float d = Math.abs(values[i]) / 127f;
            short h = Float.floatToFloat16(d);
            float other = Float.float16ToFloat((short) (h + (Float.float16ToFloat(h) < d ? 1 : -1)));
            float amax = Math.abs(values[i]);
            while (Float.floatToFloat16(amax / 127f) == h) {
                amax = Math.nextAfter(amax, other * 127.0);
            }
            values[i] = Math.copySign(amax, values[i]);
            return;
        }
        float scale = quantScale(values, blockStart, block, seg.activationType());
        float q = values[i] * scale;
        double boundary = Math.floor(q) + 0.5;
        double target = Math.rint(q) > boundary ? boundary - 1e-3 : boundary + 1e-3;
        values[i] = (float) (target / scale);
    }

    /** Diffs per compared position, and (when recording) the intermediates of every forward call. */
    private record Run(
            float[] diffs, List<float[]> logits, List<Map<String, float[]>> recorded, Map<String, Integer> widths) {}

    private Run run(List<Tie> decided, boolean record) {
        int vocab = model.vocabSize();
        List<Map<String, float[]>> recorded = new ArrayList<>();
        Map<String, Integer> widths = new HashMap<>();
        int[] call = {0};
        List<Float> diffs = new ArrayList<>();
        List<float[]> logitRows = new ArrayList<>();
        try (KvCache cache = model.newCache(256, KvCacheType.F32)) {
            GlmForward forward = new GlmForward(model, new CpuBackend(), 64);
            forward.setListener((name, layer, rows, width, values) -> {
                for (Tie tie : decided) {
                    if (tie.call() == call[0]
                            && tie.layer() == layer
                            && tie.name().equals(name)) {
                        decideOtherWay(tie, width, values);
                    }
                }
                if (record) {
                    recorded.get(call[0]).put(name + "/" + layer, Arrays.copyOf(values, rows * width));
                    widths.put(name + "/" + layer, width);
                }
            });
            recorded.add(new HashMap<>());
            float[] all = forward.forward(cache, c.promptTokens(), 0, c.promptTokens().length, true);
            for (int p = 0; p < c.promptTokens().length; p++) {
                diffs.add(Oracle.maxAbsDiff(all, p * vocab, c.promptLogits()[p], vocab));
                logitRows.add(Arrays.copyOfRange(all, p * vocab, (p + 1) * vocab));
            }
            for (int k = 0; k < c.greedyStepLogits().length; k++) {
                call[0] = k + 1;
                recorded.add(new HashMap<>());
                float[] logits = forward.forward(cache, c.greedyTokens(), k, 1, false);
                diffs.add(Oracle.maxAbsDiff(logits, 0, c.greedyStepLogits()[k], vocab));
                logitRows.add(Arrays.copyOf(logits, vocab));
            }
        }
        float[] d = new float[diffs.size()];
        for (int i = 0; i < d.length; i++) {
            d[i] = diffs.get(i);
        }
        return new Run(d, logitRows, recorded, widths);
    }
}
