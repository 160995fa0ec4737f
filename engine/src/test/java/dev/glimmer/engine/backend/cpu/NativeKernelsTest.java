package dev.glimmer.engine.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.gguf.TensorInfo;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.GlmWeights;
import dev.glimmer.engine.model.Oracle;
import dev.glimmer.engine.model.WeightMatrix;
import dev.glimmer.engine.tensor.GgmlType;
import dev.glimmer.engine.tensor.Q4_0;
import dev.glimmer.engine.tensor.QuantizedVector;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The native kernels ({@link NativeKernels}), every variant this processor runs, against the Java
 * kernels: every result equal bit for bit, in Q4_0 matmuls (1 to 9 tokens, more rows than one native call
 * takes, 1 and 2 threads), per-head matmuls, the experts' FFN of a batch, Q4_K and Q6_K matmuls, and whole
 * forward passes of the tiny Q4_0 and the small Q4_K_M oracle models.
 *
 * <p>On an x86-64 processor with AVX2 the kernel must be there: the build compiles it with the C compiler
 * that {@code ./glimmer test} makes sure of. Elsewhere these tests have nothing to compare and are skipped
 * (the Java kernels alone run there).
 */
class NativeKernelsTest {

    @Test
    void theBestVariantRunsOnThisProcessor() throws IOException {
        List<String> flags = processorFlags();
        assumeTrue(flags.contains("avx2"), "this processor lacks AVX2: the Java kernels run here");
        assertTrue(NativeKernels.runs(NativeKernels.Variant.AVX2), NativeKernels.whyJava());
        NativeKernels.Variant best =
                flags.containsAll(List.of("avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni", "avx512vbmi"))
                        ? NativeKernels.Variant.AVX512_VNNI
                        : flags.contains("avx_vnni") ? NativeKernels.Variant.AVX_VNNI : NativeKernels.Variant.AVX2;
        assertEquals(best, NativeKernels.runnable().getFirst());
        assertTrue(
                new CpuBackend(1)
                        .kernels()
                        .startsWith("native Q4_0, Q4_K, Q5_K, Q6_K and Q5_0 kernels (" + best.instructions
                                + "), Java kernels on "),
                new CpuBackend(1).kernels());
    }

    @Test
    void matmulEqualsTheJavaKernelsBitForBit() {
        List<NativeKernels.Variant> variants = variants();
        Random random = new Random(11);
        for (int cols :
                new int[] {64, 128, 192, 1536, 2048, 2048 + 96}) { // whole groups of 4 blocks, and 1 to 3 blocks more
            int rows = 150; // more than one native call's rows, and not a multiple of them
            WeightMatrix w = new WeightMatrix("w" + cols, GgmlType.Q4_0, quantizedRows(random, rows, cols), rows, cols);
            for (int threads = 1; threads <= 2; threads++) {
                CpuBackend java = new CpuBackend(threads, (NativeKernels.Variant) null);
                for (NativeKernels.Variant v : variants) {
                    CpuBackend nativeQ4_0 = new CpuBackend(threads, v);
                    for (int n : new int[] {1, 2, 3, 4, 5, 9}) {
                        int stride = cols + 5;
                        float[] x = activations(random, 2 + n * stride);
                        int outStride = rows + 3;
                        float[] expected = new float[n * outStride];
                        float[] actual = new float[n * outStride];
                        java.matmul(w, x, 2, stride, n, expected, 1, outStride);
                        nativeQ4_0.matmul(w, x, 2, stride, n, actual, 1, outStride);
                        assertArrayEquals(
                                expected, actual, v + ": " + cols + " cols, " + n + " tokens, " + threads + " threads");
                    }
                }
            }
        }
    }

    /** Per-head products as the attention's absorbed heads: Q4_0 in a Q4_0 file, Q5_0 in a Q4_K_M one. */
    @ParameterizedTest
    @ValueSource(strings = {"Q4_0", "Q5_0"})
    void perHeadMatmulEqualsTheJavaKernels(String type) {
        List<NativeKernels.Variant> variants = variants();
        Random random = new Random(12);
        int heads = 3;
        int rows = 70;
        int cols = 192; // as the absorbed key heads: a group of 4 blocks and 2 blocks
        WeightMatrix[] w = new WeightMatrix[heads];
        for (int h = 0; h < heads; h++) {
            w[h] = type.equals("Q4_0")
                    ? new WeightMatrix("head" + h, GgmlType.Q4_0, quantizedRows(random, rows, cols), rows, cols)
                    : MatmulBenchmark.randomWeights("head" + h, GgmlType.Q5_0, rows, cols, random);
        }
        int n = 6;
        float[] x = activations(random, heads * cols + n * heads * cols);
        float[] expected = new float[n * heads * rows];
        float[] actual = new float[n * heads * rows];
        new CpuBackend(2, (NativeKernels.Variant) null)
                .matmulHeads(w, x, 0, cols, heads * cols, n, expected, 0, rows, heads * rows);
        for (NativeKernels.Variant v : variants) {
            new CpuBackend(2, v).matmulHeads(w, x, 0, cols, heads * cols, n, actual, 0, rows, heads * rows);
            assertArrayEquals(expected, actual, v.setting);
        }
    }

    /**
     * Experts chosen unevenly (one by most tokens, some by none), for a decode step and batches, with Q4_0
     * experts and with a Q4_K_M file's (Q4_K gate and up, Q6_K down).
     */
    @ParameterizedTest
    @ValueSource(strings = {"Q4_0", "Q4_K"})
    void expertFfnEqualsTheJavaKernels(String gateType) {
        List<NativeKernels.Variant> variants = variants();
        Random random = new Random(13);
        int experts = 8;
        int width = 256;
        boolean kQuants = gateType.equals("Q4_K");
        int hiddenWidth = kQuants ? 512 : 384;
        GlmWeights.Ffn[] ffns = new GlmWeights.Ffn[experts];
        for (int e = 0; e < experts; e++) {
            ffns[e] = kQuants
                    ? new GlmWeights.Ffn(
                            MatmulBenchmark.randomWeights("gate" + e, GgmlType.Q4_K, hiddenWidth, width, random),
                            MatmulBenchmark.randomWeights("up" + e, GgmlType.Q4_K, hiddenWidth, width, random),
                            MatmulBenchmark.randomWeights("down" + e, GgmlType.Q6_K, width, hiddenWidth, random))
                    : new GlmWeights.Ffn(
                            new WeightMatrix(
                                    "gate" + e,
                                    GgmlType.Q4_0,
                                    quantizedRows(random, hiddenWidth, width),
                                    hiddenWidth,
                                    width),
                            new WeightMatrix(
                                    "up" + e,
                                    GgmlType.Q4_0,
                                    quantizedRows(random, hiddenWidth, width),
                                    hiddenWidth,
                                    width),
                            new WeightMatrix(
                                    "down" + e,
                                    GgmlType.Q4_0,
                                    quantizedRows(random, width, hiddenWidth),
                                    width,
                                    hiddenWidth));
        }
        int k = 3;
        for (int n : new int[] {1, 6, 11}) {
            int[] chosen = new int[n * k];
            float[] weights = new float[n * k];
            for (int t = 0; t < n; t++) {
                for (int s = 0; s < k; s++) {
                    chosen[t * k + s] = s == 0 ? 5 : (t + 2 * s) % 4; // expert 5 by every token; 4, 6, 7 by none
                    weights[t * k + s] = random.nextFloat();
                }
            }
            float[] x = activations(random, n * width);
            float[] expectedAct = new float[n * k * hiddenWidth];
            float[] actualAct = new float[n * k * hiddenWidth];
            float[] expected = new float[n * width];
            float[] actual = new float[n * width];
            new CpuBackend(2, (NativeKernels.Variant) null)
                    .expertFfn(ffns, chosen, weights, k, x, n, expectedAct, expected);
            for (NativeKernels.Variant v : variants) {
                new CpuBackend(2, v).expertFfn(ffns, chosen, weights, k, x, n, actualAct, actual);
                assertArrayEquals(expectedAct, actualAct, v.setting + ", " + n + " tokens: gate and up");
                assertArrayEquals(expected, actual, v.setting + ", " + n + " tokens: down");
            }
        }
    }

    /** The largest products the quants allow (weight quants of -8, activation quants of ±127) do not overflow. */
    @Test
    void extremeQuantsGiveTheJavaKernelsResult() {
        List<NativeKernels.Variant> variants = variants();
        int cols = 2048;
        float[] row = new float[cols];
        Arrays.fill(row, -1f);
        byte[] q = Q4_0.quantizeRow(row, 0, cols);
        MemorySegment data = Arena.ofAuto().allocate(q.length);
        MemorySegment.copy(MemorySegment.ofArray(q), 0, data, 0, q.length);
        WeightMatrix w = new WeightMatrix("extreme", GgmlType.Q4_0, data, 1, cols);
        for (float sign : new float[] {-1f, 1f}) {
            float[] x = new float[cols];
            Arrays.fill(x, sign * 3f);
            float[] expected = new float[1];
            float[] actual = new float[1];
            new CpuBackend(1, (NativeKernels.Variant) null).matmul(w, x, 0, cols, 1, expected, 0, 1);
            assertEquals(-3f * sign * cols, expected[0], 1e-3f * cols); // weights of -1 (quants of 0) times 3
            for (NativeKernels.Variant v : variants) {
                new CpuBackend(1, v).matmul(w, x, 0, cols, 1, actual, 0, 1);
                assertEquals(expected[0], actual[0], v.setting + ", sign " + sign);
            }
        }
    }

    /**
     * The native quantizer lays out exactly what the tensor package's Q8_0 quantizer gives, as the
     * layout of {@link ActivationRows} says: rows with an all-zero block, negative zeros, halves that
     * round to even, values over many magnitudes, whole groups and 1 to 3 blocks after them.
     */
    @Test
    void activationsAreLaidOutFromTheJavaQuantizer() {
        variants();
        Random random = new Random(14);
        for (int cols : new int[] {128, 192, 2048, 2048 + 96}) {
            int rows = 3;
            float[] x = new float[rows * cols];
            for (int i = 0; i < x.length; i++) {
                x[i] = (float) (random.nextGaussian() * Math.pow(10, random.nextInt(7) - 3));
            }
            Arrays.fill(x, 32, 64, 0f); // a block of zeros
            x[70] = -0f;
            for (int i = 96; i < 127; i++) {
                x[i] = i - 96 - 15.5f; // with amax 127 the quants are these values, all halves: rounded to even
            }
            x[127] = 127f;
            ActivationRows native4_0 = new ActivationRows(true, null);
            native4_0.reserve(GgmlType.Q4_0, rows, cols);
            native4_0.set(GgmlType.Q4_0, 0, x, 0, cols, rows, cols);
            for (int row = 0; row < rows; row++) {
                QuantizedVector q = new QuantizedVector(GgmlType.Q8_0);
                q.quantize(x, row * cols, cols);
                byte[] quants = new byte[cols];
                int[] biases = new int[cols / 8];
                float[] scales = new float[cols / 8];
                referenceLayout(q, cols, quants, biases, scales);
                assertArrayEquals(
                        quants,
                        Arrays.copyOfRange(native4_0.nativeQuants, row * cols, (row + 1) * cols),
                        cols + " cols, row " + row);
                int groupedLanes = cols / 128 * 16;
                assertArrayEquals(
                        Arrays.copyOf(biases, groupedLanes),
                        Arrays.copyOfRange(native4_0.nativeBiases, row * cols / 8, row * cols / 8 + groupedLanes),
                        "biases");
                for (int lane = 0; lane < cols / 8; lane++) {
                    if (lane < groupedLanes
                            || lane % 4 == 0) { // a block after the groups has its scale in its first lane
                        assertEquals(scales[lane], native4_0.laneScales[row * cols / 8 + lane], "scale lane " + lane);
                    }
                }
            }
        }
    }

    /** The native layout of {@link ActivationRows}' class comment, built from the Java quantizer's quants and scales. */
    private static void referenceLayout(QuantizedVector x, int cols, byte[] quants, int[] biases, float[] scales) {
        int grouped = cols - cols % 128;
        for (int group = 0; group < grouped; group += 128) {
            for (int k = 0; k < 4; k++) {
                int block = group + 32 * k;
                for (int i = 0; i < 16; i++) {
                    quants[group + 16 * k + i] = x.quant(block + i);
                    quants[group + 64 + 16 * k + i] = x.quant(block + 16 + i);
                }
                for (int j = 0; j < 4; j++) {
                    int sum = 0;
                    for (int i = 4 * j; i < 4 * j + 4; i++) {
                        sum += x.quant(block + i) + x.quant(block + 16 + i);
                    }
                    biases[group / 8 + 4 * k + j] = -8 * sum;
                    scales[group / 8 + 4 * k + j] = x.blockScale(block / 32);
                }
            }
        }
        for (int block = grouped; block < cols; block += 32) {
            for (int j = 0; j < 8; j++) {
                for (int m = 0; m < 4; m++) {
                    quants[block + 4 * j + m] = x.quant(block + j + 8 * m);
                }
            }
            scales[block / 8] = x.blockScale(block / 32);
        }
    }

    /**
     * The native Q4_K, Q5_K, Q6_K and Q5_0 matmuls against the Java kernels, bit for bit: the real rows of every such
     * tensor of the small Q4_K_M oracle model (1 to 11 tokens: whole and partial passes of 4, 1 and 2 threads), and random bytes with valid
     * scales over rows of 1 to 9 super-blocks (quants and scales of every value, sums of all magnitudes).
     */
    @Test
    void typedMatmulsEqualTheJavaKernelsBitForBit() throws IOException {
        List<NativeKernels.Variant> variants =
                variants().stream().filter(NativeKernels::hasTypedKernels).toList();
        assumeTrue(!variants.isEmpty(), "no native K-quant and Q5_0 kernels here");
        Random random = new Random(14);
        List<WeightMatrix> matrices = new java.util.ArrayList<>();
        try (GgufFile file = GgufFile.open(Oracle.model("small-q4_k_m"))) {
            for (TensorInfo t : file.tensors()) {
                if (NativeKernels.TYPED.contains(t.type()) && t.shape().length > 1) {
                    int rows = (int) Math.min(t.rows(), 40);
                    matrices.add(new WeightMatrix(t.name(), t.type(), file.data(t), rows, (int) t.ne(0)));
                }
            }
            for (GgmlType type : NativeKernels.TYPED) {
                for (int blocks : new int[] {1, 2, 9}) {
                    int cols = type.blockSize * blocks;
                    matrices.add(MatmulBenchmark.randomWeights(type + "x" + cols, type, 33, cols, random));
                }
            }
            for (WeightMatrix w : matrices) {
                for (int threads = 1; threads <= 2; threads++) {
                    CpuBackend java = new CpuBackend(threads, (NativeKernels.Variant) null);
                    for (NativeKernels.Variant v : variants) {
                        CpuBackend nativeKernels = new CpuBackend(threads, v);
                        for (int n : new int[] {1, 4, 5, 11}) {
                            int stride = w.cols() + 3;
                            float[] x = activations(random, 1 + n * stride);
                            float[] expected = new float[n * w.rows()];
                            float[] actual = new float[n * w.rows()];
                            java.matmul(w, x, 1, stride, n, expected, 0, w.rows());
                            nativeKernels.matmul(w, x, 1, stride, n, actual, 0, w.rows());
                            assertArrayEquals(
                                    expected,
                                    actual,
                                    v + ": " + w.name() + ", " + n + " tokens, " + threads + " threads");
                        }
                    }
                }
            }
        }
    }

    /**
     * A prompt and then decode steps of the tiny Q4_0 and the small Q4_K_M oracle models: the same logits with
     * either kernel.
     */
    @ParameterizedTest
    @ValueSource(strings = {"tiny-q4_0", "small-q4_k_m"})
    void modelLogitsAreTheSameWithEitherKernel(String name) throws IOException {
        List<NativeKernels.Variant> variants = variants();
        int[] tokens = {11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
        try (GlmModel model = GlmModel.open(Oracle.model(name))) {
            float[][] java = logits(model, new CpuBackend(2, (NativeKernels.Variant) null), tokens);
            for (NativeKernels.Variant v : variants) {
                float[][] nativeQ4_0 = logits(model, new CpuBackend(2, v), tokens);
                for (int i = 0; i < java.length; i++) {
                    assertArrayEquals(java[i], nativeQ4_0[i], v.setting + ", step " + i);
                }
            }
        }
    }

    /** The logits after a 6-token prompt, then after each of the remaining tokens decoded one by one. */
    private static float[][] logits(GlmModel model, CpuBackend backend, int[] tokens) {
        int prompt = 6;
        try (KvCache cache = model.newCache(32, KvCacheType.F32)) {
            GlmForward forward = new GlmForward(model, backend, 8);
            float[][] out = new float[tokens.length - prompt + 1][];
            out[0] = forward.forward(cache, tokens, 0, prompt, false).clone();
            for (int i = prompt; i < tokens.length; i++) {
                out[i - prompt + 1] =
                        forward.forward(cache, tokens, i, 1, false).clone();
            }
            return out;
        }
    }

    /** The variants this processor runs (the test is skipped where there is none). */
    private static List<NativeKernels.Variant> variants() {
        assumeTrue(!NativeKernels.runnable().isEmpty(), "no native variant runs here");
        return NativeKernels.runnable();
    }

    private static List<String> processorFlags() throws IOException {
        Path cpuinfo = Path.of("/proc/cpuinfo");
        if (!Files.exists(cpuinfo)) {
            return List.of();
        }
        String flags = Files.readAllLines(cpuinfo).stream()
                .filter(l -> l.startsWith("flags"))
                .findFirst()
                .orElse("");
        return Arrays.asList(flags.split("\\s+"));
    }

    /** Values over several orders of magnitude, so the double sums are exercised. */
    private static float[] activations(Random random, int count) {
        float[] x = new float[count];
        for (int i = 0; i < count; i++) {
            x[i] = (float) (random.nextGaussian() * Math.pow(10, random.nextInt(5) - 2));
        }
        return x;
    }

    /** Random rows through the reference quantizer, 2 bytes past an 8-byte boundary (as in a file). */
    private static MemorySegment quantizedRows(Random random, int rows, int cols) {
        long rowBytes = GgmlType.Q4_0.rowBytes(cols);
        MemorySegment data = Arena.ofAuto().allocate(2 + rows * rowBytes).asSlice(2);
        float[] row = new float[cols];
        for (int r = 0; r < rows; r++) {
            for (int i = 0; i < cols; i++) {
                row[i] = (float) (random.nextGaussian() * Math.pow(10, random.nextInt(3) - 1));
            }
            byte[] q = Q4_0.quantizeRow(row, 0, cols);
            MemorySegment.copy(MemorySegment.ofArray(q), 0, data, r * rowBytes, rowBytes);
        }
        return data;
    }
}
