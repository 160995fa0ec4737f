package dev.glimmer.engine.backend.cpu;

import dev.glimmer.engine.model.WeightMatrix;
import dev.glimmer.engine.tensor.GgmlType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.AuxCounters;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Mat-vec (one token) of the CPU backend at the shapes of GLM-4.7-Flash, reporting the weights
 * streamed in GB/s (the {@code gigabytes} counter, per second) to hold against the machine's memory
 * bandwidth, for the weight types of Q4_0, Q8_0 and Q4_K_M files and F16. Shapes are {@code in x out};
 * {@code 2048x1536x4} is the four selected experts' gate projections, one after the other (each a different matrix, as in decode). The weights are random
 * bytes of the type with valid scales, off-heap, 2 bytes past an aligned address like a file's blocks;
 * the biggest ones (the output head, 178 MB as Q4_0) do not fit in any cache, the small ones partly do.
 *
 * <pre>mvn -o -pl engine -am -Pbenchmark test -DskipTests -Dbenchmark=MatmulBenchmark</pre>
 */
@Fork(
        value = 1,
        jvmArgsAppend = {"--add-modules", "jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED", "-Xmx2g"})
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@State(Scope.Thread)
public class MatmulBenchmark {

    @Param({"2048x768", "768x5120", "2048x576", "5120x2048", "2048x1536x4", "1536x2048", "2048x154880"})
    public String shape;

    @Param({"Q4_0", "Q8_0", "Q5_0", "Q4_K", "Q5_K", "Q6_K", "F16"})
    public String type;

    @Param({"1", "2"})
    public int threads;

    private WeightMatrix[] matrices;
    private CpuBackend backend;
    private float[] x;
    private float[] out;
    private long bytesPerCall;

    /** GB of weights read, reported per second. */
    @AuxCounters(AuxCounters.Type.OPERATIONS)
    @State(Scope.Thread)
    public static class Streamed {
        public double gigabytes;
    }

    @Setup(Level.Trial)
    public void setUp() {
        String[] parts = shape.split("x");
        int cols = Integer.parseInt(parts[0]);
        int rows = Integer.parseInt(parts[1]);
        int count = parts.length > 2 ? Integer.parseInt(parts[2]) : 1;
        GgmlType t = GgmlType.valueOf(type);
        Random random = new Random(1);
        matrices = new WeightMatrix[count];
        for (int m = 0; m < count; m++) {
            matrices[m] = randomWeights("w" + m, t, rows, cols, random);
            bytesPerCall += rows * matrices[m].rowBytes();
        }
        x = new float[cols];
        for (int i = 0; i < cols; i++) {
            x[i] = (float) random.nextGaussian();
        }
        out = new float[rows];
        backend = new CpuBackend(threads);
    }

    /**
     * A {@code rows x cols} matrix of random bytes of type {@code t} with valid, small fp16 scales in every
     * block, off-heap, 2 bytes past an aligned address like a file's blocks.
     */
    static WeightMatrix randomWeights(String name, GgmlType t, int rows, int cols, Random random) {
        long rowBytes = t.rowBytes(cols);
        MemorySegment data = Arena.ofAuto().allocate(2 + rows * rowBytes, 64).asSlice(2);
        byte[] bytes = new byte[(int) Math.min(rows * rowBytes, 1 << 24)];
        random.nextBytes(bytes);
        for (long off = 0; off < rows * rowBytes; off += bytes.length) {
            MemorySegment.copy(
                    MemorySegment.ofArray(bytes), 0, data, off, Math.min(bytes.length, rows * rowBytes - off));
        }
        // d (and Q4_K/Q5_K's dmin) first in a block, Q6_K's d last.
        int[] scaleFields = switch (t) {
            case Q4_K, Q5_K -> new int[] {0, 2};
            case Q6_K -> new int[] {208};
            default -> new int[] {0};
        };
        for (long b = 0; b < rows * rowBytes; b += t.bytesPerBlock) {
            for (int field : scaleFields) {
                data.set(java.lang.foreign.ValueLayout.JAVA_SHORT_UNALIGNED, b + field, Float.floatToFloat16(0.01f));
            }
        }
        return new WeightMatrix(name, t, data, rows, cols);
    }

    @Benchmark
    public float matVec(Streamed streamed) {
        for (WeightMatrix w : matrices) {
            backend.matmul(w, x, 0, w.cols(), 1, out, 0, w.rows());
        }
        streamed.gigabytes += bytesPerCall / 1e9;
        return out[0];
    }
}
