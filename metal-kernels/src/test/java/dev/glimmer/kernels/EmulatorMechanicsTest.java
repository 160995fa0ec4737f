package dev.glimmer.kernels;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.kernels.emulator.Emulator;
import dev.glimmer.kernels.emulator.EmulatorException;
import dev.glimmer.kernels.emulator.FiberOrder;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The emulator's collectives, barriers, schedules and failure reports, on the test kernels of mechanics.metal. */
class EmulatorMechanicsTest {

    private static final List<FiberOrder> ORDERS =
            List.of(FiberOrder.inOrder(), FiberOrder.reversed(), FiberOrder.shuffled(1), FiberOrder.shuffled(2));

    private static Emulator emulator;

    @BeforeAll
    static void build() {
        KernelLibrary library = KernelLibrary.load()
                .with(List.of(new KernelLibrary.SourceFile(
                        "mechanics.metal", KernelLibrary.resource("/dev/glimmer/kernels/mechanics.metal"))));
        emulator = Emulator.load(library);
    }

    private static MemorySegment args(Arena arena, int n, float bias) {
        byte[] b = emulator.library().struct("MechanicsArgs").pack(Map.of("n", n, "bias", bias));
        return arena.allocateFrom(ValueLayout.JAVA_BYTE, b);
    }

    private static float[] run(String kernel, int threads, int groups, int[] memory, FiberOrder order) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(4L * 8 * threads * groups);
            emulator.dispatch(
                    kernel,
                    List.of(args(arena, threads, 0.5f), out),
                    memory,
                    Size3.of(groups),
                    Size3.of(threads),
                    order);
            return out.toArray(ValueLayout.JAVA_FLOAT);
        }
    }

    @Test
    void collectivesComputeWhatMetalDefines() {
        int threads = 64;
        int groups = 3;
        for (FiberOrder order : ORDERS) {
            float[] out = run("mech_collectives", threads, groups, new int[0], order);
            for (int g = 0; g < groups; g++) {
                for (int t = 0; t < threads; t++) {
                    int lane = t % 32;
                    int sgBase = t - lane;
                    float base = sgBase + 0.5f + 100f * g;
                    float[] expected = new float[8];
                    for (int l = 0; l < 32; l++) {
                        expected[0] += base + l;
                    }
                    expected[1] = base + 31;
                    expected[2] = base;
                    expected[3] = base + (lane ^ 1);
                    expected[4] = base + (lane + 3 < 32 ? lane + 3 : lane);
                    expected[5] = base + (lane >= 2 ? lane - 2 : lane);
                    expected[6] = base + 5;
                    expected[7] = base + (31 - lane);
                    float[] got = Arrays.copyOfRange(out, 8 * (g * threads + t), 8 * (g * threads + t) + 8);
                    assertArrayEquals(expected, got, 1e-3f, "group " + g + " thread " + t + " in " + order);
                }
            }
        }
    }

    @Test
    void barrierOrdersThreadgroupMemoryInEverySchedule() {
        for (FiberOrder order : ORDERS) {
            float[] out = run("mech_barrier", 96, 1, new int[] {96 * 4}, order);
            for (int t = 0; t < 96; t++) {
                assertEquals(2f * ((t + 1) % 96), out[t], "thread " + t + " in " + order);
            }
        }
    }

    @Test
    void shuffledOrderExposesAMissingBarrier() {
        float[] inOrder = run("mech_race", 64, 1, new int[] {64 * 4}, FiberOrder.inOrder());
        float[] reversed = run("mech_race", 64, 1, new int[] {64 * 4}, FiberOrder.reversed());
        assertFalse(Arrays.equals(inOrder, reversed), "a race must give different results in different schedules");
        // in order, the last thread reads thread 0's value (written) but thread 0 reads thread 1's (not yet written:
        // NaN)
        assertTrue(Float.isNaN(inOrder[0]));
    }

    // The failure tests share their form; each names its own kernel, fiber order and expected diagnosis.
    @Test
    void partialCollectiveIsReportedNotHung() {
        EmulatorException e = assertThrows(
                EmulatorException.class, () -> run("mech_partial_collective", 32, 2, new int[0], FiberOrder.inOrder()));
        String m = e.getMessage();
        assertTrue(m.contains("kernel mech_partial_collective, threadgroup (0,0,0)"), m);
        assertTrue(m.contains("threads 0-15 wait at simd_sum (mechanics.metal:"), m);
        assertTrue(m.contains("threads 16-31 finished"), m);
    }

    @Test
    void skippedBarrierIsReported() {
        EmulatorException e = assertThrows(
                EmulatorException.class, () -> run("mech_skipped_barrier", 64, 1, new int[0], FiberOrder.shuffled(7)));
        String m = e.getMessage();
        assertTrue(m.contains("kernel mech_skipped_barrier"), m);
        assertTrue(m.contains("thread 0 finished"), m);
        assertTrue(m.contains("threads 1-63 wait at threadgroup_barrier (mechanics.metal:"), m);
    }

    @Test
    void divergentCollectivesAreReported() {
        EmulatorException e = assertThrows(
                EmulatorException.class, () -> run("mech_diverged", 32, 1, new int[0], FiberOrder.inOrder()));
        String m = e.getMessage();
        assertTrue(m.contains("SIMD-group 0 diverged: lane 1 reached simd_max"), m);
        assertTrue(m.contains("other lanes wait at simd_sum"), m);
    }

    @Test
    void simdgroupMatricesMultiplyExactlyInFloat() {
        float[][] a = new float[8][8];
        float[][] b = new float[8][8];
        for (int r = 0; r < 8; r++) {
            for (int c = 0; c < 8; c++) {
                a[r][c] = (8 * r + c) / 4f;
                b[r][c] = (c - r) / 2f;
            }
        }
        for (FiberOrder order : ORDERS) {
            float[] out = run("mech_matrix", 32, 1, new int[] {128 * 2}, order);
            for (int r = 0; r < 8; r++) {
                for (int c = 0; c < 8; c++) {
                    float ab = 1f;
                    float abt = 1f;
                    for (int k = 0; k < 8; k++) {
                        ab += a[r][k] * b[k][c];
                        abt += a[r][k] * b[c][k];
                    }
                    String where = "(" + r + "," + c + ") in " + order;
                    assertEquals(ab, out[8 * r + c], "A B + 1 at " + where);
                    assertEquals(ab, out[64 + 8 * c + r], "A B + 1 stored transposed at " + where);
                    assertEquals(abt, out[128 + 8 * r + c], "A B^T + 1 at " + where);
                }
            }
        }
    }

    @Test
    void aMatrixOperationOfPartOfASimdGroupIsReported() {
        EmulatorException e = assertThrows(
                EmulatorException.class,
                () -> run("mech_partial_matrix", 32, 1, new int[] {128}, FiberOrder.inOrder()));
        String m = e.getMessage();
        assertTrue(m.contains("threads 0-15 wait at simdgroup_load (mechanics.metal:"), m);
        assertTrue(m.contains("threads 16-31 finished"), m);
    }

    @Test
    void emulatorKeepsWorkingAfterAFailure() {
        assertThrows(EmulatorException.class, () -> run("mech_diverged", 32, 1, new int[0], FiberOrder.inOrder()));
        float[] out = run("mech_barrier", 32, 1, new int[] {32 * 4}, FiberOrder.inOrder());
        assertEquals(2f, out[0]);
    }
}
