package dev.glimmer.engine.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Walks llama.cpp's intermediates of the chat prompt on tiny-f32 ({@code refs/tiny-f32.trace.json}) in
 * graph order and compares ours with each, so that a regression fails at the first wrong intermediate.
 */
class GlmForwardTraceTest {
    private static final double TOLERANCE = 1e-4;

    @Test
    void everyIntermediateOfTinyF32MatchesLlamaCpp() throws Exception {
        JsonNode trace = Oracle.json("refs/tiny-f32.trace.json");
        int[] tokens = Oracle.ints(trace.get("prompt_tokens"));
        Map<String, float[]> ours = new HashMap<>();
        try (GlmModel model = GlmModel.open(Oracle.model("tiny-f32"));
                KvCache cache =
                        new KvCache(model.config().layers(), model.config().kvRowWidth(), 64, KvCacheType.F32)) {
            GlmForward forward = new GlmForward(model, new CpuBackend(), tokens.length);
            forward.setListener((name, layer, rows, width, values) ->
                    ours.put(layer < 0 ? name : name + "-" + layer, Arrays.copyOf(values, rows * width)));
            forward.forward(cache, tokens, 0, tokens.length, true);
            int heads = model.config().heads();

            Map<String, List<JsonNode>> byName = new HashMap<>();
            List<JsonNode> inOrder = new ArrayList<>();
            trace.get("tensors").forEach(t -> {
                byName.computeIfAbsent(t.get("name").asText(), k -> new ArrayList<>())
                        .add(t);
                inOrder.add(t);
            });
            int compared = 0;
            Map<String, Integer> seen = new HashMap<>();
            for (JsonNode t : inOrder) {
                String full = t.get("name").asText();
                int occurrence = seen.merge(full, 1, Integer::sum) - 1;
                int occurrences = byName.get(full).size();
                String ourName = ourName(full, occurrence, occurrences);
                if (ourName == null) {
                    continue;
                }
                float[] expected = Oracle.floats(t.get("data"));
                float[] actual = ours.get(ourName);
                assertTrue(actual != null, "the forward pass did not report " + ourName + " (trace " + full + ")");
                if (full.startsWith("q_nope_absorbed")) {
                    actual = headMajor(actual, tokens.length, heads);
                }
                assertEquals(expected.length, actual.length, full + " size");
                double scale = 1;
                for (float v : expected) {
                    scale = Math.max(scale, Math.abs(v));
                }
                for (int i = 0; i < expected.length; i++) {
                    double diff = Math.abs(expected[i] - actual[i]);
                    if (diff > TOLERANCE * scale) {
                        throw new AssertionError("first wrong intermediate: " + full + " (occurrence " + occurrence
                                + ", ours " + ourName + ") at index " + i + ": llama.cpp " + expected[i] + ", ours "
                                + actual[i]);
                    }
                }
                compared++;
            }
            assertTrue(compared >= 60, "compared only " + compared + " intermediates");
        }
    }

    /**
     * Our name for llama.cpp's {@code occurrence}-th tensor called {@code full}, or null for views we do not
     * report separately (the states before RoPE or before a norm, and the reshape of q).
     */
    private static String ourName(String full, int occurrence, int occurrences) {
        int dash = full.lastIndexOf('-');
        String base = dash < 0 ? full : full.substring(0, dash);
        String layer = dash < 0 ? "" : full.substring(dash);
        return switch (base) {
            case "q" ->
                switch (occurrence) {
                    case 0 -> "q_a" + layer;
                    case 1 -> "q_a_norm" + layer;
                    case 2 -> "q" + layer;
                    default -> null;
                };
            case "q_pe", "kv_cmpr", "k_pe" -> occurrence == occurrences - 1 ? full : null;
            default -> full;
        };
    }

    /** Ours is [token][head][c]; llama.cpp's q_nope_absorbed is [head][token][c]. */
    private static float[] headMajor(float[] v, int tokens, int heads) {
        int width = v.length / (tokens * heads);
        float[] out = new float[v.length];
        for (int t = 0; t < tokens; t++) {
            for (int h = 0; h < heads; h++) {
                System.arraycopy(v, (t * heads + h) * width, out, (h * tokens + t) * width, width);
            }
        }
        return out;
    }
}
