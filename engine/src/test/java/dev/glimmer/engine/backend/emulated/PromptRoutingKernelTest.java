package dev.glimmer.engine.backend.emulated;

import static dev.glimmer.engine.backend.emulated.KernelTestSupport.*;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.Size3;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The prompt command list's routing: moe_select picks each token's experts from its router logits as the
 * model does (sigmoid, the bias for the choice only, top 4, the weights normalized and scaled), and moe_route
 * lists each expert's entries in token order with the table of their blocks, from those ids. A batch of GLM's
 * 64 experts and 4 slots whose last tokens are unused: one expert (biased up) is every token's, so its list
 * spans several tiles of {@link Geometry#EXPERT_TOKENS} entries, and one (biased down) is nobody's.
 */
class PromptRoutingKernelTest {

    private static final int TOKENS = 3 * Geometry.EXPERT_TOKENS + 5;
    private static final int ACTIVE = TOKENS - 3;
    private static final int ROUTED = 4;
    private static final int EXPERTS = 64;
    private static final float SCALE = 1.8f;
    private static final int EVERYONES = 7;
    private static final int NOBODYS = 12;

    @Test
    void selectsEachTokensExpertsAndListsEachExpertsTokens() {
        Random random = new Random(23);
        float[] logits = randomVector(TOKENS * EXPERTS, random);
        float[] bias = new float[EXPERTS];
        for (int e = 0; e < EXPERTS; e++) {
            bias[e] = 0.01f * random.nextFloat();
        }
        bias[EVERYONES] = 2;
        bias[NOBODYS] = -2;
        Map<String, Number> a = new HashMap<>(Map.of(
                "cols",
                1,
                "routed",
                ROUTED,
                "rows",
                1,
                "experts",
                EXPERTS,
                "tokens",
                TOKENS,
                "gating",
                2,
                "has_bias",
                1,
                "normalize",
                1,
                "scale",
                SCALE));
        // the expert multiplies' fields, which the routing does not read
        a.putAll(Map.of(
                "gate_type",
                0,
                "up_type",
                0,
                "shared_rows",
                0,
                "shared_gate_type",
                0,
                "shared_up_type",
                0,
                "act_stride",
                1,
                "eps",
                1e-5f,
                "split",
                1));

        // moe_select against the selection computed here
        int[] noIds = new int[TOKENS * ROUTED];
        Arrays.fill(noIds, 12345);
        List<float[]> selected = runInBothOrders(
                "moe_select",
                arena -> List.of(
                        args(arena, "GateUpArgs", a),
                        floats(arena, logits),
                        floats(arena, bias),
                        ints(arena, noIds),
                        floats(arena, new float[TOKENS * ROUTED]),
                        steps(arena, TOKENS, ACTIVE)),
                new int[0],
                Size3.of((TOKENS + Geometry.WIDE_SIMDGROUPS - 1) / Geometry.WIDE_SIMDGROUPS),
                Size3.of(Geometry.WIDE_SIMDGROUPS * 32),
                3,
                4);
        int[] ids = bits(selected.get(0));
        for (int t = 0; t < TOKENS; t++) {
            int[] want = new int[ROUTED];
            float[] weights = new float[ROUTED];
            select(Arrays.copyOfRange(logits, t * EXPERTS, (t + 1) * EXPERTS), bias, want, weights);
            for (int k = 0; k < ROUTED; k++) {
                int got = ids[t * ROUTED + k];
                if (t >= ACTIVE) {
                    assertEquals(-1, got, "token " + t + " is unused");
                    continue;
                }
                assertEquals(want[k], got, "token " + t + " slot " + k);
                assertEquals(weights[k], selected.get(1)[t * ROUTED + k], 1e-6f * SCALE, "token " + t + " slot " + k);
            }
        }

        // moe_route from those ids against the lists built here
        int[] routes = new int[EXPERTS * TOKENS];
        int[] counts = new int[EXPERTS];
        for (int i = 0; i < TOKENS * ROUTED; i++) {
            if (ids[i] >= 0) {
                routes[ids[i] * TOKENS + counts[ids[i]]++] = i;
            }
        }
        assertEquals(ACTIVE, counts[EVERYONES]);
        assertEquals(0, counts[NOBODYS]);
        int[] blocks = new int[(TOKENS * ROUTED + Geometry.EXPERT_TOKENS - 1) / Geometry.EXPERT_TOKENS + EXPERTS];
        Arrays.fill(blocks, 0xFFFFFFFF);
        int b = 0;
        for (int e = 0; e < EXPERTS; e++) {
            for (int first = 0; first < counts[e]; first += Geometry.EXPERT_TOKENS) {
                blocks[b++] = e << 16 | first;
            }
        }
        int threads = Geometry.HEAD_SIMDGROUPS * 32;
        int[] memory = {4 * (TOKENS * ROUTED + threads + Geometry.HEAD_SIMDGROUPS + EXPERTS)};
        List<float[]> listed = runInBothOrders(
                "moe_route",
                arena -> List.of(
                        args(arena, "GateUpArgs", a),
                        ints(arena, ids),
                        ints(arena, new int[EXPERTS * TOKENS]),
                        ints(arena, new int[EXPERTS]),
                        ints(arena, new int[blocks.length])),
                memory,
                Size3.of(EXPERTS),
                Size3.of(threads),
                2,
                3,
                4);
        assertArrayEquals(routes, bits(listed.get(0)), "routes");
        assertArrayEquals(counts, bits(listed.get(1)), "counts");
        assertArrayEquals(blocks, bits(listed.get(2)), "blocks");
    }

    /** GLM's expert selection: sigmoid, top ROUTED of sigmoid + bias (the first of equals), weights normalized x SCALE. */
    private static void select(float[] logits, float[] bias, int[] ids, float[] weights) {
        double[] prob = new double[EXPERTS];
        boolean[] taken = new boolean[EXPERTS];
        for (int e = 0; e < EXPERTS; e++) {
            prob[e] = 1 / (1 + Math.exp(-logits[e]));
        }
        double total = 0;
        for (int k = 0; k < ROUTED; k++) {
            int best = -1;
            for (int e = 0; e < EXPERTS; e++) {
                if (!taken[e] && (best < 0 || prob[e] + bias[e] > prob[best] + bias[best])) {
                    best = e;
                }
            }
            taken[best] = true;
            ids[k] = best;
            total += prob[best];
        }
        for (int k = 0; k < ROUTED; k++) {
            weights[k] = (float) (prob[ids[k]] / total * SCALE);
        }
    }

    private static int[] bits(float[] v) {
        int[] out = new int[v.length];
        for (int i = 0; i < v.length; i++) {
            out[i] = Float.floatToRawIntBits(v[i]);
        }
        return out;
    }
}
