package dev.glimmer.engine.backend.emulated;

import static dev.glimmer.engine.backend.emulated.KernelTestSupport.*;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.tensor.GgmlType;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.Size3;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The MoE kernels (router, gate+up, down) against the float reference of docs/MODEL.md §4. */
class MoeKernelTest {

    private static final float EPS = 1e-5f;
    private static final double TOLERANCE = 1e-5;
    private static final int MV_THREADS = Geometry.MV_SIMDGROUPS * 32;

    // ---- router ----

    /** The reference selection: ids and final weights, and the relative gap between the last chosen and the first rejected selection score. */
    record Routing(int[] ids, double[] weights, double gap) {}

    static Routing routerReference(float[] logits, float[] bias, int used, int gating, boolean normalize, float scale) {
        int n = logits.length;
        double[] p = new double[n];
        if (gating == 1) {
            double m = Double.NEGATIVE_INFINITY;
            for (float l : logits) {
                m = Math.max(m, l);
            }
            double sum = 0;
            for (int e = 0; e < n; e++) {
                p[e] = Math.exp(logits[e] - m);
                sum += p[e];
            }
            for (int e = 0; e < n; e++) {
                p[e] /= sum;
            }
        } else {
            for (int e = 0; e < n; e++) {
                p[e] = 1 / (1 + Math.exp(-logits[e]));
            }
        }
        double[] choice = new double[n];
        for (int e = 0; e < n; e++) {
            choice[e] = p[e] + (bias != null ? bias[e] : 0);
        }
        int[] ids = new int[used];
        double[] w = new double[used];
        double total = 0;
        for (int k = 0; k < used; k++) {
            int best = 0;
            for (int e = 1; e < n; e++) {
                if (choice[e] > choice[best]) {
                    best = e;
                }
            }
            ids[k] = best;
            w[k] = p[best];
            total += p[best];
            choice[best] = Double.NEGATIVE_INFINITY;
        }
        double lastChosen = p[ids[used - 1]] + (bias != null ? bias[ids[used - 1]] : 0);
        double firstRejected = Double.NEGATIVE_INFINITY;
        for (int e = 0; e < n; e++) {
            firstRejected = Math.max(firstRejected, choice[e]);
        }
        double divisor = normalize ? Math.max(total, 6.103515625e-5) : 1;
        for (int k = 0; k < used; k++) {
            w[k] = w[k] / divisor * scale;
        }
        return new Routing(ids, w, (lastChosen - firstRejected) / Math.abs(lastChosen));
    }

    private static void checkRouter(int experts, int used, int cols, int gating, boolean withBias, long seed) {
        Random random = new Random(seed);
        MemorySegment w = randomWeights(GgmlType.F32, experts, cols, random);
        float[] x = randomVector(cols, random);
        float[] normW = randomVector(cols, random);
        float[] bias = randomVector(experts, random);
        for (int e = 0; e < experts; e++) {
            bias[e] *= 0.05f; // like exp_probs_b: small enough that probabilities still matter
        }
        float[] h = rmsNorm(x, normW, EPS);
        float[] logits = new float[experts];
        double[] expected = new double[experts];
        double[] magnitude = new double[experts];
        for (int e = 0; e < experts; e++) {
            Dot d = dot(dequantizedRow(w, GgmlType.F32, e, cols), h);
            logits[e] = (float) d.value();
            expected[e] = d.value();
            magnitude[e] = d.magnitude();
        }
        Routing ref = routerReference(logits, withBias ? bias : null, used, gating, true, 1.8f);
        assertTrue(ref.gap() > 1e-4, "test data must not hold a near-tie at the selection boundary");

        int split = Geometry.mvSplit(experts);
        int per = Geometry.mvRowsPerThreadgroup(split);
        Map<String, Number> a =
                Map.of("type", GgmlType.F32.id, "cols", cols, "experts", experts, "eps", EPS, "split", split);
        float[] got = runInBothOrders(
                "moe_router",
                arena -> List.of(
                        args(arena, "RouterArgs", a),
                        copy(arena, w),
                        floats(arena, x),
                        floats(arena, normW),
                        arena.allocate(4L * experts),
                        steps(arena, 1, 1)),
                4,
                new int[] {4 * Geometry.MV_SCRATCH_FLOATS},
                Size3.of((experts + per - 1) / per),
                Size3.of(MV_THREADS));
        assertClose(expected, magnitude, got, TOLERANCE, "router logits");

        // the selection gate+up makes from the kernel's logits is the reference's from the exact ones
        Selection s = runGateUp(
                experts,
                java.util.stream.IntStream.range(0, experts).toArray(),
                got,
                withBias ? bias : null,
                gating,
                used,
                256,
                8,
                GgmlType.Q8_0,
                GgmlType.Q8_0,
                0,
                GgmlType.F32,
                GgmlType.F32,
                seed);
        assertArrayEquals(ref.ids(), s.ids(), "selected experts");
        for (int k = 0; k < used; k++) {
            assertEquals(ref.weights()[k], s.weights()[k], 1e-5 * Math.abs(ref.weights()[k]) + 1e-7, "weight " + k);
        }
    }

    @Test
    void routerSigmoidWithSelectionBias() {
        checkRouter(8, 2, 256, 2, true, 11);
        checkRouter(16, 3, 512, 2, true, 12);
    }

    @Test
    void routerSoftmaxWithoutBias() {
        checkRouter(8, 2, 256, 1, false, 13);
    }

    @Test
    void routerRealShape() {
        checkRouter(64, 4, 2048, 2, true, 14);
    }

    // ---- gate+up (with the expert selection) ----

    /** What moe_gate_up wrote: the selection for down (ids, weights) and act (rows a slot does not have zeroed). */
    record Selection(int[] ids, float[] weights, float[] act) {}

    /**
     * Runs moe_gate_up with the router's {@code logits} over stacked experts of which {@code stocked}
     * hold random data (the others zeros); checks act against the float reference for the experts the
     * kernel selected, and that rows a slot does not have stay untouched.
     */
    private static Selection runGateUp(
            int experts,
            int[] stocked,
            float[] logits,
            float[] bias,
            int gating,
            int routed,
            int cols,
            int rows,
            GgmlType gateType,
            GgmlType upType,
            int sharedRows,
            GgmlType sharedGateType,
            GgmlType sharedUpType,
            long seed) {
        Random random = new Random(seed);
        Map<Integer, MemorySegment> gates = new HashMap<>();
        Map<Integer, MemorySegment> ups = new HashMap<>();
        for (int e : stocked) {
            gates.put(e, randomWeights(gateType, rows, cols, random));
            ups.put(e, randomWeights(upType, rows, cols, random));
        }
        MemorySegment gateShared = sharedRows > 0 ? randomWeights(sharedGateType, sharedRows, cols, random) : null;
        MemorySegment upShared = sharedRows > 0 ? randomWeights(sharedUpType, sharedRows, cols, random) : null;
        float[] x = randomVector(cols, random);
        float[] normW = randomVector(cols, random);
        float[] h = rmsNorm(x, normW, EPS);
        int stride = Math.max(rows, sharedRows);
        int slots = routed + 1;

        Map<String, Number> a = new HashMap<>(Map.of(
                "cols",
                cols,
                "routed",
                routed,
                "rows",
                rows,
                "gate_type",
                gateType.id,
                "up_type",
                upType.id,
                "shared_rows",
                sharedRows,
                "shared_gate_type",
                sharedGateType.id,
                "shared_up_type",
                sharedUpType.id,
                "act_stride",
                stride));
        a.put("eps", EPS);
        int split = Geometry.mvSplit((long) stride * slots);
        a.put("split", split);
        a.put("experts", experts);
        a.put("gating", gating);
        a.put("has_bias", bias != null ? 1 : 0);
        a.put("normalize", 1);
        a.put("scale", 1.8f);
        a.put("tokens", 1);
        int per = Geometry.mvRowsPerThreadgroup(split);
        int groups = (stride + per - 1) / per;
        List<float[]> out = runInBothOrders(
                "moe_gate_up",
                arena -> {
                    List<MemorySegment> b = new ArrayList<>();
                    b.add(args(arena, "GateUpArgs", a));
                    b.add(floats(arena, x));
                    b.add(floats(arena, normW));
                    b.add(routed > 0 ? stackedExperts(arena, gateType, experts, rows, cols, gates) : null);
                    b.add(routed > 0 ? stackedExperts(arena, upType, experts, rows, cols, ups) : null);
                    b.add(gateShared != null ? copy(arena, gateShared) : null);
                    b.add(upShared != null ? copy(arena, upShared) : null);
                    b.add(floats(arena, logits));
                    b.add(bias != null ? floats(arena, bias) : null);
                    // rows a slot does not have stay untouched: NaN marks them
                    float[] init = new float[slots * stride];
                    java.util.Arrays.fill(init, Float.NaN);
                    b.add(floats(arena, init));
                    b.add(arena.allocate(4L * Math.max(1, routed)));
                    b.add(arena.allocate(4L * Math.max(1, routed)));
                    b.add(steps(arena, 1, 1));
                    return b;
                },
                new int[] {4 * Geometry.MV_SCRATCH_FLOATS},
                new Size3(1, slots, groups),
                Size3.of(MV_THREADS),
                9,
                10,
                11);
        float[] act = out.get(0);
        int[] ids = new int[routed];
        float[] weights = new float[routed];
        for (int k = 0; k < routed; k++) {
            ids[k] = Float.floatToRawIntBits(out.get(1)[k]);
            weights[k] = out.get(2)[k];
            assertTrue(ids[k] >= 0 && ids[k] < experts, "selected expert " + ids[k]);
        }

        double[] expected = new double[slots * stride];
        double[] magnitude = new double[slots * stride];
        for (int s = 0; s < slots; s++) {
            boolean shared = s == routed;
            int n = shared ? sharedRows : rows;
            for (int r = 0; r < n; r++) {
                MemorySegment gw = shared ? gateShared : gates.get(ids[s]);
                MemorySegment uw = shared ? upShared : ups.get(ids[s]);
                assertTrue(gw != null, "slot " + s + " selected an expert without test data");
                Dot g = dot(dequantizedRow(gw, shared ? sharedGateType : gateType, r, cols), h);
                Dot u = dot(dequantizedRow(uw, shared ? sharedUpType : upType, r, cols), h);
                expected[s * stride + r] = silu(g.value()) * u.value();
                magnitude[s * stride + r] = 2.2 * g.magnitude() * u.magnitude();
            }
            for (int r = n; r < stride; r++) {
                assertTrue(Float.isNaN(act[s * stride + r]), "slot " + s + " row " + r + " must not be written");
                act[s * stride + r] = 0;
            }
        }
        assertClose(expected, magnitude, act, TOLERANCE, "moe_gate_up");
        return new Selection(ids, weights, act);
    }

    /**
     * gate+up for the experts {@code ids}, picked in this order by sigmoid gating from logits that
     * rank them first: the selection written for down must be the reference's.
     */
    private static void checkGateUp(
            int experts,
            int[] ids,
            int cols,
            int rows,
            GgmlType gateType,
            GgmlType upType,
            int sharedRows,
            GgmlType sharedGateType,
            GgmlType sharedUpType,
            long seed) {
        Random random = new Random(seed);
        float[] logits = new float[experts];
        for (int e = 0; e < experts; e++) {
            logits[e] = -4 + 2 * random.nextFloat();
        }
        for (int k = 0; k < ids.length; k++) {
            logits[ids[k]] = 3 - 0.5f * k;
        }
        Selection s = runGateUp(
                experts,
                ids,
                logits,
                null,
                2,
                ids.length,
                cols,
                rows,
                gateType,
                upType,
                sharedRows,
                sharedGateType,
                sharedUpType,
                seed);
        assertArrayEquals(ids, s.ids(), "selected experts");
        if (ids.length > 0) {
            Routing ref = routerReference(logits, null, ids.length, 2, true, 1.8f);
            assertArrayEquals(ids, ref.ids(), "the test's logits rank the experts in the given order");
            for (int k = 0; k < ids.length; k++) {
                assertEquals(ref.weights()[k], s.weights()[k], 1e-5 * Math.abs(ref.weights()[k]) + 1e-7, "weight " + k);
            }
        }
    }

    @Test
    void gateUpSmallWithSharedExpertOfAnotherType() {
        checkGateUp(8, new int[] {5, 2}, 256, 64, GgmlType.Q4_K, GgmlType.Q4_K, 96, GgmlType.Q5_0, GgmlType.Q8_0, 21);
        checkGateUp(8, new int[] {0, 7, 3}, 512, 40, GgmlType.Q4_0, GgmlType.Q6_K, 24, GgmlType.F16, GgmlType.F32, 22);
    }

    @Test
    void gateUpDenseLayerIsTheSharedSlotAlone() {
        checkGateUp(1, new int[0], 128, 8, GgmlType.F32, GgmlType.F32, 320, GgmlType.Q8_0, GgmlType.Q8_0, 23);
    }

    /** 64 experts, top-4, 2048 -> 1536, shared expert in another quant type (as in real Q4_0 files). */
    @Test
    void gateUpRealShape() {
        checkGateUp(
                64,
                new int[] {63, 0, 17, 42},
                2048,
                1536,
                GgmlType.Q4_0,
                GgmlType.Q4_0,
                1536,
                GgmlType.Q5_K,
                GgmlType.Q5_K,
                24);
    }

    // ---- down ----

    private static void checkDown(
            int experts, int[] ids, int cols, int rows, GgmlType type, int sharedCols, GgmlType sharedType, long seed) {
        Random random = new Random(seed);
        int routed = ids.length;
        Map<Integer, MemorySegment> downs = new HashMap<>();
        for (int id : ids) {
            downs.put(id, randomWeights(type, rows, cols, random));
        }
        MemorySegment shared = sharedCols > 0 ? randomWeights(sharedType, rows, sharedCols, random) : null;
        int stride = Math.max(cols, sharedCols);
        float[] act = randomVector((routed + 1) * stride, random);
        float[] weights = randomVector(Math.max(1, routed), random);
        float[] x = randomVector(rows, random);

        double[] expected = new double[rows];
        double[] magnitude = new double[rows];
        for (int r = 0; r < rows; r++) {
            expected[r] = x[r];
            magnitude[r] = Math.abs(x[r]);
            for (int s = 0; s < routed; s++) {
                Dot d = dot(
                        dequantizedRow(downs.get(ids[s]), type, r, cols),
                        java.util.Arrays.copyOfRange(act, s * stride, s * stride + cols));
                expected[r] += weights[s] * d.value();
                magnitude[r] += Math.abs(weights[s]) * d.magnitude();
            }
            if (shared != null) {
                Dot d = dot(
                        dequantizedRow(shared, sharedType, r, sharedCols),
                        java.util.Arrays.copyOfRange(act, routed * stride, routed * stride + sharedCols));
                expected[r] += d.value();
                magnitude[r] += d.magnitude();
            }
        }
        Map<String, Number> a = Map.of(
                "cols",
                cols,
                "rows",
                rows,
                "routed",
                routed,
                "type",
                type.id,
                "shared_cols",
                sharedCols,
                "shared_type",
                sharedType.id,
                "act_stride",
                stride,
                "split",
                Geometry.MV_FEW_ROWS_SPLIT,
                "experts",
                experts,
                "tokens",
                1);
        int per = Geometry.mvRowsPerThreadgroup(Geometry.MV_FEW_ROWS_SPLIT);
        int groups = (rows + per - 1) / per;
        float[] got = runInBothOrders(
                "moe_down",
                arena -> {
                    List<MemorySegment> b = new ArrayList<>();
                    b.add(args(arena, "DownArgs", a));
                    b.add(stackedExperts(arena, type, experts, rows, cols, downs));
                    b.add(shared != null ? copy(arena, shared) : null);
                    b.add(floats(arena, act));
                    b.add(ints(arena, ids));
                    b.add(floats(arena, weights));
                    b.add(floats(arena, x));
                    b.add(steps(arena, 1, 1));
                    return b;
                },
                6,
                new int[] {4 * Geometry.MV_SCRATCH_FLOATS},
                Size3.of(1, groups),
                Size3.of(MV_THREADS));
        assertClose(expected, magnitude, got, TOLERANCE, "moe_down");
    }

    @Test
    void downSmallWithSharedExpertOfAnotherType() {
        checkDown(8, new int[] {6, 1}, 256, 48, GgmlType.Q5_K, 512, GgmlType.Q4_0, 31);
        checkDown(8, new int[] {2, 3, 4}, 64, 20, GgmlType.Q8_0, 64, GgmlType.F16, 32);
    }

    @Test
    void downDenseLayer() {
        checkDown(1, new int[0], 64, 128, GgmlType.F32, 320, GgmlType.Q8_0, 33);
    }

    /** 64 experts, top-4, 1536 -> 2048, shared expert in another quant type. */
    @Test
    void downRealShape() {
        checkDown(64, new int[] {9, 33, 60, 1}, 1536, 2048, GgmlType.Q4_0, 1536, GgmlType.Q6_K, 34);
    }
}
