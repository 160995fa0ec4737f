package dev.glimmer.engine.backend.emulated;

import static dev.glimmer.engine.backend.emulated.KernelTestSupport.*;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.tensor.GgmlType;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.Size3;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The prompt command list's grouped experts (moe_experts_gate_up, moe_experts_down) against dequantized
 * weights rounded to half times activations as two halves, as the matrix units take them: a batch of two tiles of
 * {@link Geometry#EXPERT_TOKENS} tokens whose last one is unused, expert lists as moe_route writes them (one
 * expert takes every token, so its list spans two tiles, the second partly used; one expert gets none), gate
 * and up of different types in one tile, and the shared expert of another width, whose down rows end inside a
 * tile's step of {@link Geometry#MM_DEPTH} values.
 */
class PromptExpertsKernelTest {

    private static final double TOLERANCE = 1e-5;
    private static final int TOKENS = 2 * Geometry.EXPERT_TOKENS;
    private static final int ACTIVE = TOKENS - 1;
    private static final int ROUTED = 2;
    private static final int EXPERTS = 4;
    private static final int HIDDEN = 256;
    private static final int FFN = 64;
    private static final int SHARED = 80;
    private static final int ACT_STRIDE = Math.max(FFN, SHARED);
    private static final int SLOTS = ROUTED + 1;

    /** The expert of (token, slot): slot 0 is expert 0 for every token, slot 1 expert 1 or 2; expert 3 gets none. */
    private static int expert(int token, int slot) {
        return slot == 0 ? 0 : 1 + token % 2;
    }

    /** moe_route's lists: routes[e * TOKENS ..] the entries token * ROUTED + slot in token order, counts, blocks. */
    private record Routes(int[] routes, int[] counts, int[] blocks) {
        static Routes of() {
            int[] routes = new int[EXPERTS * TOKENS];
            int[] counts = new int[EXPERTS];
            for (int i = 0; i < ACTIVE * ROUTED; i++) {
                int e = expert(i / ROUTED, i % ROUTED);
                routes[e * TOKENS + counts[e]++] = i;
            }
            List<Integer> blocks = new ArrayList<>();
            for (int e = 0; e < EXPERTS; e++) {
                for (int first = 0; first < counts[e]; first += Geometry.EXPERT_TOKENS) {
                    blocks.add(e << 16 | first);
                }
            }
            int[] table = new int[routedBlocks()];
            Arrays.fill(table, 0xFFFFFFFF);
            for (int b = 0; b < blocks.size(); b++) {
                table[b] = blocks.get(b);
            }
            return new Routes(routes, counts, table);
        }
    }

    private static int routedBlocks() {
        return (TOKENS * ROUTED + Geometry.EXPERT_TOKENS - 1) / Geometry.EXPERT_TOKENS + EXPERTS;
    }

    private static int blockColumns() {
        return routedBlocks() + (TOKENS + Geometry.EXPERT_TOKENS - 1) / Geometry.EXPERT_TOKENS;
    }

    private static int groups(int n, int size) {
        return (n + size - 1) / size;
    }

    @Test
    void gateUpMatchesTheDequantizedProducts() {
        Random random = new Random(21);
        GgmlType gateType = GgmlType.Q4_0;
        GgmlType upType = GgmlType.Q8_0;
        GgmlType sharedGateType = GgmlType.F16;
        GgmlType sharedUpType = GgmlType.Q5_0;
        MemorySegment gate = randomWeights(gateType, EXPERTS * FFN, HIDDEN, random);
        MemorySegment up = randomWeights(upType, EXPERTS * FFN, HIDDEN, random);
        MemorySegment sharedGate = randomWeights(sharedGateType, SHARED, HIDDEN, random);
        MemorySegment sharedUp = randomWeights(sharedUpType, SHARED, HIDDEN, random);
        float[] x = randomVector(TOKENS * HIDDEN, random);
        float[] act0 = randomVector(TOKENS * SLOTS * ACT_STRIDE, random);
        double[] expected = new double[act0.length];
        double[] magnitude = new double[act0.length];
        for (int i = 0; i < act0.length; i++) {
            expected[i] = act0[i];
        }
        for (int t = 0; t < ACTIVE; t++) {
            float[] in = toHalfPairs(Arrays.copyOfRange(x, t * HIDDEN, (t + 1) * HIDDEN));
            for (int k = 0; k < SLOTS; k++) {
                boolean shared = k == ROUTED;
                int rows = shared ? SHARED : FFN;
                for (int r = 0; r < rows; r++) {
                    int row = shared ? r : expert(t, k) * FFN + r;
                    Dot g = dot(
                            toHalves(dequantizedRow(
                                    shared ? sharedGate : gate, shared ? sharedGateType : gateType, row, HIDDEN)),
                            in);
                    Dot u = dot(
                            toHalves(dequantizedRow(
                                    shared ? sharedUp : up, shared ? sharedUpType : upType, row, HIDDEN)),
                            in);
                    int i = (t * SLOTS + k) * ACT_STRIDE + r;
                    double silu = silu(g.value());
                    expected[i] = silu * u.value();
                    // silu' <= 1.1: the error of g through silu times u, plus silu(g) times the error of u
                    magnitude[i] = 1.1 * Math.abs(u.value()) * g.magnitude() + Math.abs(silu) * u.magnitude();
                }
            }
        }
        Routes routes = Routes.of();
        Map<String, Number> a = new HashMap<>(Map.of(
                "cols",
                HIDDEN,
                "routed",
                ROUTED,
                "rows",
                FFN,
                "gate_type",
                gateType.id,
                "up_type",
                upType.id,
                "shared_rows",
                SHARED,
                "shared_gate_type",
                sharedGateType.id,
                "shared_up_type",
                sharedUpType.id,
                "act_stride",
                ACT_STRIDE));
        // the selection's fields, which the expert kernels do not read
        a.putAll(Map.of(
                "experts",
                EXPERTS,
                "tokens",
                TOKENS,
                "eps",
                1e-5f,
                "split",
                1,
                "gating",
                1,
                "has_bias",
                0,
                "normalize",
                0,
                "scale",
                1f));
        float[] got = runInBothOrders(
                "moe_experts_gate_up",
                arena -> List.of(
                        args(arena, "GateUpArgs", a),
                        floats(arena, x),
                        copy(arena, gate),
                        copy(arena, up),
                        copy(arena, sharedGate),
                        copy(arena, sharedUp),
                        ints(arena, routes.routes()),
                        ints(arena, routes.counts()),
                        ints(arena, routes.blocks()),
                        floats(arena, act0),
                        steps(arena, TOKENS, ACTIVE)),
                9,
                tileMemory(Geometry.EXPERT_ROWS, Geometry.EXPERT_TOKENS),
                Size3.of(blockColumns(), groups(SHARED, Geometry.EXPERT_ROWS / 2)),
                Size3.of(Geometry.MM_SIMDGROUPS * 32));
        assertClose(expected, magnitude, got, TOLERANCE, "moe_experts_gate_up");
        assertUntouched(act0, got, ACTIVE * SLOTS * ACT_STRIDE);
    }

    @Test
    void downMatchesTheDequantizedProducts() {
        Random random = new Random(22);
        GgmlType type = GgmlType.Q8_0;
        GgmlType sharedType = GgmlType.F16;
        MemorySegment down = randomWeights(type, EXPERTS * HIDDEN, FFN, random);
        MemorySegment sharedDown = randomWeights(sharedType, HIDDEN, SHARED, random);
        float[] act = randomVector(TOKENS * SLOTS * ACT_STRIDE, random);
        float[] y0 = randomVector(TOKENS * SLOTS * HIDDEN, random);
        double[] expected = new double[y0.length];
        double[] magnitude = new double[y0.length];
        for (int i = 0; i < y0.length; i++) {
            expected[i] = y0[i];
        }
        for (int t = 0; t < ACTIVE; t++) {
            for (int k = 0; k < SLOTS; k++) {
                boolean shared = k == ROUTED;
                int cols = shared ? SHARED : FFN;
                int from = (t * SLOTS + k) * ACT_STRIDE;
                float[] in = toHalfPairs(Arrays.copyOfRange(act, from, from + cols));
                for (int r = 0; r < HIDDEN; r++) {
                    Dot d = shared
                            ? dot(toHalves(dequantizedRow(sharedDown, sharedType, r, SHARED)), in)
                            : dot(toHalves(dequantizedRow(down, type, expert(t, k) * HIDDEN + r, FFN)), in);
                    int i = (t * SLOTS + k) * HIDDEN + r;
                    expected[i] = d.value();
                    magnitude[i] = d.magnitude();
                }
            }
        }
        Routes routes = Routes.of();
        Map<String, Number> a = Map.of(
                "cols",
                FFN,
                "rows",
                HIDDEN,
                "routed",
                ROUTED,
                "type",
                type.id,
                "shared_cols",
                SHARED,
                "shared_type",
                sharedType.id,
                "act_stride",
                ACT_STRIDE,
                "experts",
                EXPERTS,
                "tokens",
                TOKENS,
                "split",
                1);
        float[] got = runInBothOrders(
                "moe_experts_down",
                arena -> List.of(
                        args(arena, "DownArgs", a),
                        copy(arena, down),
                        copy(arena, sharedDown),
                        floats(arena, act),
                        ints(arena, routes.routes()),
                        ints(arena, routes.counts()),
                        ints(arena, routes.blocks()),
                        floats(arena, y0),
                        steps(arena, TOKENS, ACTIVE)),
                7,
                tileMemory(Geometry.EXPERT_ROWS, Geometry.EXPERT_TOKENS),
                Size3.of(blockColumns(), groups(HIDDEN, Geometry.EXPERT_ROWS)),
                Size3.of(Geometry.MM_SIMDGROUPS * 32));
        assertClose(expected, magnitude, got, TOLERANCE, "moe_experts_down");
        assertUntouched(y0, got, ACTIVE * SLOTS * HIDDEN);
    }

    /** The unused token's rows (from {@code from} on) keep their values. */
    private static void assertUntouched(float[] before, float[] after, int from) {
        for (int i = from; i < before.length; i++) {
            assertTrue(before[i] == after[i], "the unused token's row was written at " + i);
        }
    }
}
