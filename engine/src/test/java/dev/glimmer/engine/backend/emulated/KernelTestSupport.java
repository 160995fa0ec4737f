package dev.glimmer.engine.backend.emulated;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.tensor.Dequantizer;
import dev.glimmer.engine.tensor.GgmlType;
import dev.glimmer.engine.tensor.Q4_0;
import dev.glimmer.engine.tensor.Q8_0;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.Size3;
import dev.glimmer.kernels.emulator.Emulator;
import dev.glimmer.kernels.emulator.FiberOrder;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.function.Function;

/**
 * Random weights of every kernel type, the float reference (ggml's dequantization times float
 * activations, in double) and running a kernel in two fiber orders that must agree bit for bit.
 */
public final class KernelTestSupport {

    static final List<GgmlType> TYPES = List.of(
            GgmlType.F32,
            GgmlType.F16,
            GgmlType.Q4_0,
            GgmlType.Q5_0,
            GgmlType.Q8_0,
            GgmlType.Q4_K,
            GgmlType.Q5_K,
            GgmlType.Q6_K);

    static final ValueLayout.OfShort HALF = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private KernelTestSupport() {}

    private static Emulator emulator;

    static synchronized Emulator emulator() {
        if (emulator == null) {
            emulator = Emulator.load();
        }
        return emulator;
    }

    /**
     * A rows x cols weight matrix of {@code type}: quantized from random floats where we have the reference
     * quantizer, else random blocks with sane scales. Off-heap, so native code (the CUDA copy) can read it.
     */
    public static MemorySegment randomWeights(GgmlType type, int rows, int cols, Random random) {
        long rowBytes = type.rowBytes(cols);
        MemorySegment w = Arena.ofAuto().allocate(rowBytes * rows, 16);
        float[] values = new float[cols];
        for (int r = 0; r < rows; r++) {
            long at = r * rowBytes;
            for (int i = 0; i < cols; i++) {
                values[i] = (float) random.nextGaussian();
            }
            switch (type) {
                case F32 -> MemorySegment.copy(values, 0, w, ValueLayout.JAVA_FLOAT_UNALIGNED, at, cols);
                case F16 -> {
                    for (int i = 0; i < cols; i++) {
                        w.set(HALF, at + 2L * i, Float.floatToFloat16(values[i]));
                    }
                }
                case Q4_0 -> Q4_0.quantizeRow(values, 0, cols, w, at);
                case Q8_0 -> Q8_0.quantizeRow(values, 0, cols, w, at);
                default -> randomBlocks(w, at, type, cols, random);
            }
        }
        return w;
    }

    /** Random bytes with the block scales replaced by small finite halves (random ones could be NaN or huge). */
    private static void randomBlocks(MemorySegment w, long at, GgmlType type, int cols, Random random) {
        int blocks = cols / type.blockSize;
        byte[] bytes = new byte[type.bytesPerBlock * blocks];
        random.nextBytes(bytes);
        MemorySegment.copy(bytes, 0, w, ValueLayout.JAVA_BYTE, at, bytes.length);
        for (int b = 0; b < blocks; b++) {
            long block = at + (long) b * type.bytesPerBlock;
            switch (type) {
                case Q5_0 -> setHalf(w, block, random, 0.1f);
                case Q4_K, Q5_K -> {
                    setHalf(w, block, random, 0.01f);
                    setHalf(w, block + 2, random, 0.01f);
                }
                case Q6_K -> setHalf(w, block + 208, random, 0.01f);
                default -> throw new IllegalArgumentException("no random blocks for " + type);
            }
        }
    }

    private static void setHalf(MemorySegment w, long at, Random random, float scale) {
        w.set(HALF, at, Float.floatToFloat16((float) (random.nextGaussian() * scale)));
    }

    public static float[] randomVector(int n, Random random) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = (float) random.nextGaussian();
        }
        return v;
    }

    /** Row {@code row} of a weight matrix, dequantized by the engine's reference. */
    static float[] dequantizedRow(MemorySegment w, GgmlType type, int row, int cols) {
        float[] out = new float[cols];
        Dequantizer.dequantizeRow(type, w, type.rowBytes(cols) * row, out, 0, cols);
        return out;
    }

    /** The dot of a dequantized row with x, in double, and the sum of |w_i x_i| (the scale of its rounding error). */
    record Dot(double value, double magnitude) {}

    static Dot dot(float[] w, float[] x) {
        double s = 0;
        double m = 0;
        for (int i = 0; i < w.length; i++) {
            s += (double) w[i] * x[i];
            m += Math.abs((double) w[i] * x[i]);
        }
        return new Dot(s, m);
    }

    /** Weights as the prompt kernels' matrix units multiply them: rounded to half. */
    public static float[] toHalves(float[] v) {
        float[] out = new float[v.length];
        for (int i = 0; i < v.length; i++) {
            out[i] = half(v[i]);
        }
        return out;
    }

    /** Activations as the prompt kernels' matrix units multiply them: hi = half(x) plus lo = half(x - hi). */
    public static float[] toHalfPairs(float[] v) {
        float[] out = new float[v.length];
        for (int i = 0; i < v.length; i++) {
            float hi = half(v[i]);
            out[i] = hi + half(v[i] - hi);
        }
        return out;
    }

    private static float half(float v) {
        return Float.float16ToFloat(Float.floatToFloat16(v));
    }

    /** v in native memory as halves (the GPU KV cache's format). */
    static MemorySegment halves(Arena arena, float[] v) {
        MemorySegment s = arena.allocate(2L * Math.max(1, v.length), 16);
        for (int i = 0; i < v.length; i++) {
            s.set(HALF, 2L * i, Float.floatToFloat16(v[i]));
        }
        return s;
    }

    /** The halves of {@code s} as floats. */
    static float[] fromHalves(MemorySegment s) {
        float[] v = new float[(int) (s.byteSize() / 2)];
        for (int i = 0; i < v.length; i++) {
            v[i] = Float.float16ToFloat(s.get(HALF, 2L * i));
        }
        return v;
    }

    /**
     * The GPU numerics policy's measure of a kernel (docs/KERNELS.md §7): the normalized mean squared error of
     * {@code got} against a float64 reference, sum (got - expected)^2 / sum expected^2.
     */
    static double nmse(double[] expected, float[] got) {
        double err = 0;
        double norm = 0;
        for (int i = 0; i < expected.length; i++) {
            double d = got[i] - expected[i];
            err += d * d;
            norm += expected[i] * expected[i];
        }
        return err / norm;
    }

    /** The policy's bound on a kernel's {@link #nmse} for matrix products and attention. */
    static final double MAX_NMSE = 5e-4;

    static void assertNmse(double[] expected, float[] got, String what) {
        double e = nmse(expected, got);
        System.out.printf(java.util.Locale.ROOT, "%s: normalized mean squared error %.3g%n", what, e);
        assertTrue(e <= MAX_NMSE, what + ": normalized mean squared error " + e + " > " + MAX_NMSE);
    }

    /** The threadgroup memory of a prompt kernel's tile of rows x tokens (Geometry.mmMemoryFloats), in bytes. */
    static int[] tileMemory(int rows, int tokens) {
        return new int[] {4 * Geometry.mmMemoryFloats(rows, tokens)};
    }

    public static float[] rmsNorm(float[] x, float[] weight, float eps) {
        double ss = 0;
        for (float v : x) {
            ss += (double) v * v;
        }
        float scale = (float) (1.0 / Math.sqrt(ss / x.length + eps));
        float[] out = new float[x.length];
        for (int i = 0; i < x.length; i++) {
            out[i] = x[i] * scale * weight[i];
        }
        return out;
    }

    /** Asserts |got - expected| <= tolerance * magnitude (+ a tiny absolute floor) for every element. */
    static void assertClose(double[] expected, double[] magnitude, float[] got, double tolerance, String what) {
        for (int i = 0; i < expected.length; i++) {
            double err = Math.abs(got[i] - expected[i]);
            double allowed = tolerance * magnitude[i] + 1e-6;
            assertTrue(
                    err <= allowed,
                    what + ": element " + i + " is " + got[i] + ", expected " + expected[i] + " (error " + err + " > "
                            + allowed + ")");
        }
    }

    /** A native copy of {@code data} (kernels read buffers through raw pointers). */
    static MemorySegment copy(Arena arena, MemorySegment data) {
        MemorySegment s = arena.allocate(Math.max(16, data.byteSize()), 16);
        s.copyFrom(data);
        return s;
    }

    static MemorySegment floats(Arena arena, float[] v) {
        MemorySegment s = arena.allocate(4L * Math.max(1, v.length), 16);
        MemorySegment.copy(v, 0, s, ValueLayout.JAVA_FLOAT, 0, v.length);
        return s;
    }

    static MemorySegment ints(Arena arena, int[] v) {
        MemorySegment s = arena.allocate(4L * Math.max(1, v.length), 16);
        MemorySegment.copy(v, 0, s, ValueLayout.JAVA_INT, 0, v.length);
        return s;
    }

    static MemorySegment args(Arena arena, String struct, Map<String, ? extends Number> values) {
        byte[] b = emulator().library().struct(struct).pack(values);
        MemorySegment s = arena.allocate(b.length, 16);
        MemorySegment.copy(b, 0, s, ValueLayout.JAVA_BYTE, 0, b.length);
        return s;
    }

    /**
     * The {@code StepArgs} of a batch of {@code tokens}: the first {@code active} at positions 0, 1, ...,
     * the rest with kv_len 0 (no token there: the kernels skip them).
     */
    static MemorySegment steps(Arena arena, int tokens, int active) {
        var struct = emulator().library().struct("StepArgs");
        MemorySegment s = arena.allocate((long) struct.size() * tokens, 16);
        for (int t = 0; t < tokens; t++) {
            byte[] b =
                    struct.pack(Map.of("token", 0, "pos", t, "kv_len", t < active ? t + 1 : 0, "kv_row", 0, "slot", 0));
            MemorySegment.copy(b, 0, s, ValueLayout.JAVA_BYTE, (long) t * struct.size(), b.length);
        }
        return s;
    }

    /**
     * Runs a dispatch once in order and once in a shuffled order, each on fresh copies of the
     * buffers from {@code setup}; asserts that the {@code outputs} buffers end bit-identical and
     * returns them (as floats; int buffers through {@link Float#floatToRawIntBits}).
     */
    static List<float[]> runInBothOrders(
            String kernel,
            Function<Arena, List<MemorySegment>> setup,
            int[] threadgroupMemory,
            Size3 grid,
            Size3 threads,
            int... outputs) {
        List<List<float[]>> runs = new ArrayList<>();
        for (FiberOrder order : List.of(FiberOrder.inOrder(), FiberOrder.shuffled(42))) {
            try (Arena arena = Arena.ofConfined()) {
                List<MemorySegment> buffers = setup.apply(arena);
                emulator().dispatch(kernel, buffers, threadgroupMemory, grid, threads, order);
                List<float[]> out = new ArrayList<>();
                for (int o : outputs) {
                    out.add(buffers.get(o).toArray(ValueLayout.JAVA_FLOAT));
                }
                runs.add(out);
            }
        }
        for (int i = 0; i < outputs.length; i++) {
            assertArrayEquals(
                    runs.get(0).get(i),
                    runs.get(1).get(i),
                    kernel + ": buffer " + outputs[i] + " differs between in-order and shuffled runs");
        }
        return runs.get(0);
    }

    static float[] runInBothOrders(
            String kernel,
            Function<Arena, List<MemorySegment>> setup,
            int output,
            int[] threadgroupMemory,
            Size3 grid,
            Size3 threads) {
        return runInBothOrders(kernel, setup, threadgroupMemory, grid, threads, output)
                .getFirst();
    }

    /**
     * A stacked expert tensor [experts][rows][cols] in native memory: the given experts hold their
     * data, every other expert is zero (so reading a wrong expert shows).
     */
    static MemorySegment stackedExperts(
            Arena arena, GgmlType type, int experts, int rows, int cols, Map<Integer, MemorySegment> data) {
        long expertBytes = type.rowBytes(cols) * rows;
        MemorySegment s = arena.allocate(expertBytes * experts, 16);
        data.forEach((e, d) -> MemorySegment.copy(d, 0, s, expertBytes * e, expertBytes));
        return s;
    }

    static float silu(double x) {
        return (float) (x / (1 + Math.exp(-x)));
    }
}
