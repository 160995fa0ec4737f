package dev.glimmer.engine.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.glimmer.engine.model.WeightMatrix;
import dev.glimmer.engine.tensor.GgmlType;
import dev.glimmer.engine.tensor.Q4_0;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import jdk.incubator.vector.ShortVector;
import org.junit.jupiter.api.Test;

/**
 * The Java Q4_0, K-quant and Q5_0 kernels give the same bits whatever vector width the CPU runs natively: this JVM (512-bit
 * vectors on an AVX-512 machine) against a child JVM limited to AVX2 ({@code -XX:UseAVX=2}, so its
 * preferred vectors are 256 bits and the kernels take a group of four blocks in two halves), on matrix
 * products of 1, 2 and 5 tokens over rows of whole groups and of 1 to 3 blocks more. That is what lets one
 * set of oracle figures and the native kernels' bit-equality hold on every x86 machine.
 */
class VectorWidthTest {
    private static final int[] COLS = {64, 192, 1024 + 96};
    private static final int ROWS = 9;

    @Test
    void q4_0MatmulsAreTheSameWith256BitVectors() throws Exception {
        assumeTrue(ShortVector.SPECIES_PREFERRED.length() == 32, "this CPU has no 512-bit vectors to compare with");
        List<String> expected = results();
        String out = ChildJvm.run(
                VectorWidthTest.class,
                Duration.ofSeconds(60),
                List.of("--add-modules", "jdk.incubator.vector", "-XX:UseAVX=2"));
        List<String> actual = out.lines().filter(l -> !l.startsWith("WARNING")).toList();
        assertEquals("preferred shorts 16", actual.getFirst(), "the child JVM runs 256-bit vectors");
        assertEquals(expected, actual.subList(1, actual.size()));
    }

    /** The child JVM: its preferred vector width, then {@link #results()}. */
    public static void main(String[] args) {
        System.out.println("preferred shorts " + ShortVector.SPECIES_PREFERRED.length());
        results().forEach(System.out::println);
    }

    /** One line per case: its columns, tokens and every result's float bits. */
    private static List<String> results() {
        Random random = new Random(21);
        List<String> lines = new ArrayList<>();
        CpuBackend backend = new CpuBackend(1, (NativeKernels.Variant) null);
        List<WeightMatrix> matrices = new ArrayList<>();
        for (int cols : COLS) {
            matrices.add(new WeightMatrix("w", GgmlType.Q4_0, rows(random, cols), ROWS, cols));
        }
        // The K-quant and Q5_0 kernels: random bytes with valid scales, rows of 1 and 3 super-blocks.
        for (GgmlType type : new GgmlType[] {GgmlType.Q4_K, GgmlType.Q5_K, GgmlType.Q6_K, GgmlType.Q5_0}) {
            for (int cols : new int[] {256, 768}) {
                matrices.add(MatmulBenchmark.randomWeights(type.toString(), type, ROWS, cols, random));
            }
        }
        for (WeightMatrix w : matrices) {
            int cols = w.cols();
            for (int n : new int[] {1, 2, 5}) { // one token, two, and a pass of four with one more
                float[] x = new float[n * cols];
                for (int i = 0; i < x.length; i++) {
                    x[i] = (float) (random.nextGaussian() * Math.pow(10, random.nextInt(5) - 2));
                }
                float[] out = new float[n * ROWS];
                backend.matmul(w, x, 0, cols, n, out, 0, ROWS);
                StringBuilder line = new StringBuilder(w.type() + " " + cols + "x" + n);
                for (float v : out) {
                    line.append(' ').append(Integer.toHexString(Float.floatToRawIntBits(v)));
                }
                lines.add(line.toString());
            }
        }
        return lines;
    }

    private static MemorySegment rows(Random random, int cols) {
        long rowBytes = GgmlType.Q4_0.rowBytes(cols);
        MemorySegment data = Arena.ofAuto().allocate(ROWS * rowBytes);
        float[] row = new float[cols];
        for (int r = 0; r < ROWS; r++) {
            for (int i = 0; i < cols; i++) {
                row[i] = (float) (random.nextGaussian() * Math.pow(10, random.nextInt(3) - 1));
            }
            MemorySegment.copy(MemorySegment.ofArray(Q4_0.quantizeRow(row, 0, cols)), 0, data, r * rowBytes, rowBytes);
        }
        return data;
    }
}
