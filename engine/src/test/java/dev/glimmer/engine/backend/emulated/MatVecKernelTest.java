package dev.glimmer.engine.backend.emulated;

import static dev.glimmer.engine.backend.emulated.KernelTestSupport.*;

import dev.glimmer.engine.tensor.GgmlType;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.Size3;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/** The mat_vec kernel against dequantized weights times float activations, for every weight type. */
class MatVecKernelTest {

    private static final float EPS = 1e-5f;
    /** Float sums of a few thousand products: errors stay far below 1e-5 of the sum of magnitudes. */
    private static final double TOLERANCE = 1e-5;

    static Stream<Arguments> smallCases() {
        List<Arguments> cases = new ArrayList<>();
        for (GgmlType t : TYPES) {
            for (boolean norm : new boolean[] {false, true}) {
                for (boolean add : new boolean[] {false, true}) {
                    cases.add(Arguments.of(t, 512, 37, norm, add, add ? 1 : Geometry.MV_FEW_ROWS_SPLIT));
                }
            }
            cases.add(Arguments.of(t, 256, 19, true, true, 2));
            cases.add(Arguments.of(t, 512, 21, true, false, 8)); // every SIMD-group on one row set
        }
        return cases.stream();
    }

    @ParameterizedTest(name = "{0} {1}x{2} norm={3} add={4} split={5}")
    @MethodSource("smallCases")
    void smallShapes(GgmlType type, int cols, int rows, boolean norm, boolean add, int split) {
        check(type, cols, rows, norm, add, split, type.ordinal() * 100 + cols + rows);
    }

    /** The real GLM-4.7-Flash shapes: q_a (2048x768, with attn_norm), q_b (768x5120), attn_output (5120x2048, + residual). */
    @Test
    void realShapes() {
        check(GgmlType.Q4_0, 2048, 768, true, false, Geometry.mvSplit(768), 1);
        check(GgmlType.Q4_K, 768, 5120, true, false, Geometry.mvSplit(5120), 2);
        check(GgmlType.Q4_0, 5120, 2048, false, true, Geometry.mvSplit(2048), 3);
        check(GgmlType.Q6_K, 5120, 2048, false, true, Geometry.mvSplit(2048), 4);
    }

    private static void check(GgmlType type, int cols, int rows, boolean norm, boolean add, int split, long seed) {
        Random random = new Random(seed);
        MemorySegment w = randomWeights(type, rows, cols, random);
        float[] x = randomVector(cols, random);
        float[] normW = randomVector(cols, random);
        float[] residual = randomVector(rows, random);

        double[] expected = new double[rows];
        double[] magnitude = new double[rows];
        float[] in = norm ? rmsNorm(x, normW, EPS) : x;
        for (int r = 0; r < rows; r++) {
            Dot d = dot(dequantizedRow(w, type, r, cols), in);
            expected[r] = d.value() + (add ? residual[r] : 0);
            magnitude[r] = d.magnitude() + (add ? Math.abs(residual[r]) : 0);
        }
        Map<String, Number> a = Map.of(
                "type",
                type.id,
                "cols",
                cols,
                "rows",
                rows,
                "norm",
                norm ? 1 : 0,
                "add",
                add ? 1 : 0,
                "eps",
                EPS,
                "split",
                split,
                "w_step",
                0,
                "x_step",
                0,
                "y_step",
                0);
        int per = Geometry.mvRowsPerThreadgroup(split);
        int groups = (rows + per - 1) / per;
        float[] got = runInBothOrders(
                "mat_vec",
                arena -> {
                    // with the residual added, y is the residual buffer itself: the in-place update the decode step
                    // uses
                    MemorySegment y = add ? floats(arena, residual) : arena.allocate(4L * rows, 16);
                    return List.of(
                            args(arena, "MatVecArgs", a), copy(arena, w), floats(arena, x), y, floats(arena, normW), y);
                },
                3,
                new int[] {4 * Geometry.MV_SCRATCH_FLOATS},
                Size3.of(groups),
                Size3.of(Geometry.MV_SIMDGROUPS * 32));
        assertClose(expected, magnitude, got, TOLERANCE, "mat_vec " + type + " " + cols + "x" + rows);
    }
}
