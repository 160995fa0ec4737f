package dev.glimmer.engine.backend.emulated;

import dev.glimmer.engine.tensor.GgmlType;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.Size3;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.FieldSource;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;

import static dev.glimmer.engine.backend.emulated.KernelTestSupport.*;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The prompt command list's mat_mat against dequantized weights times float activations, for every weight
 * type: a batch of two blocks of {@link Geometry#MM_TOKENS} tokens whose last one is unused (kv_len 0: its
 * output must stay untouched), two stacked matrices (grid z, as k_b's heads) each reading its own part of
 * every token's row, with and without the residual add.
 */
class MatMatKernelTest {

    private static final double TOLERANCE = 1e-5;

    @ParameterizedTest
    @FieldSource("dev.glimmer.engine.backend.emulated.KernelTestSupport#TYPES")
    void matchesTheDequantizedProducts(GgmlType type) {
        for (boolean add : new boolean[] {false, true}) {
            check(type, 512, 37, add, type.ordinal() * 10L + (add ? 1 : 0));
        }
        // a row that ends inside a lane's step (the K-quants' blocks are 256 values)
        check(type, type.blockSize == 256 ? 768 : 160, 9, false, type.ordinal() * 10L + 2);
    }

    private static void check(GgmlType type, int cols, int rows, boolean add, long seed) {
        Random random = new Random(seed);
        int tokens = 2 * Geometry.MM_TOKENS;
        int active = tokens - 1;
        int matrices = 2;
        MemorySegment w = randomWeights(type, rows * matrices, cols, random);
        // token t's row: the matrices' inputs one after another, then a gap (x_stride > matrices * cols)
        int xStride = matrices * cols + 4;
        int yStride = matrices * rows + 3;
        float[] x = randomVector(tokens * xStride, random);
        float[] y0 = randomVector(tokens * yStride, random);
        double[] expected = new double[tokens * yStride];
        double[] magnitude = new double[tokens * yStride];
        for (int i = 0; i < expected.length; i++) {
            expected[i] = y0[i];
            magnitude[i] = Math.abs(y0[i]);
        }
        for (int t = 0; t < active; t++) {
            for (int z = 0; z < matrices; z++) {
                float[] in = Arrays.copyOfRange(x, t * xStride + z * cols, t * xStride + (z + 1) * cols);
                for (int r = 0; r < rows; r++) {
                    Dot d = dot(dequantizedRow(w, type, z * rows + r, cols), in);
                    int i = t * yStride + z * rows + r;
                    expected[i] = d.value() + (add ? y0[i] : 0);
                    magnitude[i] = d.magnitude() + (add ? Math.abs(y0[i]) : 0);
                }
            }
        }
        Map<String, Number> a = Map.of("type", type.id, "cols", cols, "rows", rows, "tokens", tokens,
                "x_stride", xStride, "y_stride", yStride, "w_step", type.rowBytes(cols) * rows, "x_step", cols,
                "y_step", rows, "add", add ? 1 : 0);
        int perGroup = Geometry.MM_SIMDGROUPS * Geometry.MV_ROWS_PER_SIMDGROUP;
        float[] got = runInBothOrders("mat_mat", arena -> List.of(args(arena, "MatMatArgs", a), copy(arena, w),
                        floats(arena, x), floats(arena, y0), steps(arena, tokens, active)), 3, new int[0],
                new Size3(tokens / Geometry.MM_TOKENS, (rows + perGroup - 1) / perGroup, matrices),
                Size3.of(Geometry.MM_SIMDGROUPS * 32));
        assertClose(expected, magnitude, got, TOLERANCE, "mat_mat " + type + (add ? " + residual" : ""));
        for (int i = (tokens - 1) * yStride; i < tokens * yStride; i++) {
            assertTrue(got[i] == y0[i], "the unused token's row was written at " + i);
        }
    }
}
