package dev.glimmer.engine.backend.emulated;

import static dev.glimmer.engine.backend.emulated.KernelTestSupport.*;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.tensor.GgmlType;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.Size3;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.FieldSource;

/**
 * The prompt command list's mat_mat against dequantized weights rounded to half times activations as two
 * halves, as the matrix units take them (the emulator's products are exact and its sums float), for every weight type: a
 * batch of a full tile of {@link Geometry#MM_TOKENS} tokens and a second one of 8 tokens whose last one is unused
 * (kv_len 0: its output must stay untouched), two stacked matrices (grid z, as k_b's heads) each reading its own part of every
 * token's row, rows that end inside a tile, with and without the residual add. mat_mat_float, which the
 * router's F32 weights and every weight of a batch decode list take, against the same products in float, with
 * each row set's columns split over 1, 2 and 4 SIMD-groups.
 */
class MatMatKernelTest {

    private static final double TOLERANCE = 1e-5;

    @ParameterizedTest
    @FieldSource("dev.glimmer.engine.backend.emulated.KernelTestSupport#TYPES")
    void matchesTheDequantizedProducts(GgmlType type) {
        for (boolean add : new boolean[] {false, true}) {
            check(type, 512, 37, add, type.ordinal() * 10L + (add ? 1 : 0));
        }
        // rows that end inside a tile's step of MM_DEPTH values where the type allows (F32, F16), else other lengths
        check(type, type.blockSize == 256 ? 768 : type.blockSize == 32 ? 160 : 144, 9, false, type.ordinal() * 10L + 2);
    }

    @Test
    void f32WeightsMultiplyInFloat() {
        for (boolean add : new boolean[] {false, true}) {
            check("mat_mat_float", GgmlType.F32, 512, 37, add, 1, add ? 3 : 4);
        }
        check("mat_mat_float", GgmlType.F32, 144, 9, false, 1, 5);
    }

    @ParameterizedTest
    @FieldSource("dev.glimmer.engine.backend.emulated.KernelTestSupport#TYPES")
    void floatProductsSplitOverSimdGroups(GgmlType type) {
        int cols = type.blockSize == 256 ? 768 : 512;
        for (int split : new int[] {1, 2, 4}) {
            check("mat_mat_float", type, cols, 21, split == 2, split, type.ordinal() * 10L + split);
        }
    }

    /**
     * A matrix's columns in parts (mat_mat's threadgroups each take a part's, mat_mat_parts adds them up): two and four
     * parts of 256 columns, with the residual and without.
     */
    @ParameterizedTest
    @EnumSource(names = {"F16", "Q4_0", "Q8_0", "Q4_K", "Q6_K"})
    void columnPartsAddUp(GgmlType type) {
        check("mat_mat", type, 512, 37, true, 1, 2, type.ordinal() * 10L + 7);
        check("mat_mat", type, 1024, 21, false, 1, 4, type.ordinal() * 10L + 8);
    }

    private static void check(GgmlType type, int cols, int rows, boolean add, long seed) {
        check("mat_mat", type, cols, rows, add, 1, seed);
    }

    private static void check(String kernel, GgmlType type, int cols, int rows, boolean add, int split, long seed) {
        check(kernel, type, cols, rows, add, split, 1, seed);
    }

    private static void check(
            String kernel, GgmlType type, int cols, int rows, boolean add, int split, int parts, long seed) {
        boolean tiles = kernel.equals("mat_mat");
        int tokensPerGroup = tiles ? Geometry.MM_TOKENS : Geometry.MM_FLOAT_TOKENS;
        int rowsPerGroup = tiles ? Geometry.MM_ROWS : Geometry.mmFloatRowsPerThreadgroup(split);
        Random random = new Random(seed);
        int tokens = tokensPerGroup + 8;
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
                    float[] row = dequantizedRow(w, type, z * rows + r, cols);
                    Dot d = tiles ? dot(toHalves(row), toHalfPairs(in)) : dot(row, in);
                    int i = t * yStride + z * rows + r;
                    expected[i] = d.value() + (add ? y0[i] : 0);
                    magnitude[i] = d.magnitude() + (add ? Math.abs(y0[i]) : 0);
                }
            }
        }
        Map<String, Number> a = new HashMap<>(Map.of(
                "type",
                type.id,
                "cols",
                cols,
                "rows",
                rows,
                "tokens",
                tokens,
                "x_stride",
                xStride,
                "y_stride",
                yStride,
                "w_step",
                type.rowBytes(cols) * rows,
                "x_step",
                cols,
                "y_step",
                rows,
                "add",
                add ? 1 : 0));
        a.put("split", split);
        a.put("parts", parts);
        float[] noPartials = new float[matrices * parts * tokens * rows];
        Size3 grid = new Size3(
                (tokens + tokensPerGroup - 1) / tokensPerGroup * parts,
                (rows + rowsPerGroup - 1) / rowsPerGroup,
                matrices);
        float[] got;
        if (tiles) {
            List<float[]> out = runInBothOrders(
                    kernel,
                    arena -> List.of(
                            args(arena, "MatMatArgs", a),
                            copy(arena, w),
                            floats(arena, x),
                            floats(arena, y0),
                            steps(arena, tokens, active),
                            floats(arena, noPartials)),
                    tileMemory(Geometry.MM_ROWS, Geometry.MM_TOKENS),
                    grid,
                    Size3.of(Geometry.MM_SIMDGROUPS * 32),
                    3,
                    5);
            got = out.get(0);
            if (parts > 1) {
                got = runInBothOrders(
                        "mat_mat_parts",
                        arena -> List.of(
                                args(arena, "MatMatArgs", a),
                                floats(arena, out.get(1)),
                                floats(arena, y0),
                                steps(arena, tokens, active)),
                        2,
                        new int[0],
                        new Size3(
                                tokens,
                                (rows + Geometry.WIDE_SIMDGROUPS * 32 - 1) / (Geometry.WIDE_SIMDGROUPS * 32),
                                matrices),
                        Size3.of(Geometry.WIDE_SIMDGROUPS * 32));
            }
        } else {
            got = runInBothOrders(
                    kernel,
                    arena -> List.of(
                            args(arena, "MatMatArgs", a),
                            copy(arena, w),
                            floats(arena, x),
                            floats(arena, y0),
                            steps(arena, tokens, active)),
                    3,
                    new int[] {4 * Geometry.MM_FLOAT_PARTIALS},
                    grid,
                    Size3.of(Geometry.MM_SIMDGROUPS * 32));
        }
        assertClose(
                expected,
                magnitude,
                got,
                TOLERANCE,
                kernel + " " + type + (add ? " + residual" : "") + " split " + split + " parts " + parts);
        for (int i = (tokens - 1) * yStride; i < tokens * yStride; i++) {
            assertTrue(got[i] == y0[i], "the unused token's row was written at " + i);
        }
    }
}
