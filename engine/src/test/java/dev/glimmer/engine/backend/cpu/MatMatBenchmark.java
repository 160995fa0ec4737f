package dev.glimmer.engine.backend.cpu;

import dev.glimmer.engine.model.WeightMatrix;
import dev.glimmer.engine.tensor.GgmlType;
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
 * A Q4_0, Q4_K or Q6_K matrix ({@code type}) times several tokens, as a prompt multiplies: the multiply-adds per second (the
 * {@code gigaMacs} counter) to hold against what the kernel reaches (docs/BENCHMARKS.md gives the
 * machine's figures), and the weights streamed ({@code gigabytes}). Shapes are {@code in x out x
 * tokens}: an expert's gate projection with the ~4 tokens a 64-token prompt routes to each expert, and
 * the attention output with a whole 64-token batch. {@code kernels}: {@code native} (the best variant of
 * the native kernel this processor runs; the trial fails where none does), a variant ({@code avx2},
 * {@code avx-vnni}, ...) or {@code java} (the Vector API kernels).
 *
 * <pre>mvn -o -pl engine -am -Pbenchmark test -DskipTests -Dbenchmark=MatMatBenchmark</pre>
 */
@Fork(
        value = 1,
        jvmArgsAppend = {"--add-modules", "jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED", "-Xmx2g"})
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@State(Scope.Thread)
public class MatMatBenchmark {

    @Param({"2048x1536x4", "5120x2048x64"})
    public String shape;

    @Param({"Q4_0", "Q4_K", "Q6_K"})
    public String type;

    @Param({"native", "java"})
    public String kernels;

    @Param({"1", "2"})
    public int threads;

    private WeightMatrix matrix;
    private CpuBackend backend;
    private int tokens;
    private float[] x;
    private float[] out;

    /** Billions of multiply-adds and GB of weights read, reported per second. */
    @AuxCounters(AuxCounters.Type.OPERATIONS)
    @State(Scope.Thread)
    public static class Work {
        public double gigaMacs;
        public double gigabytes;
    }

    @Setup(Level.Trial)
    public void setUp() {
        String[] parts = shape.split("x");
        int cols = Integer.parseInt(parts[0]);
        int rows = Integer.parseInt(parts[1]);
        tokens = Integer.parseInt(parts[2]);
        Random random = new Random(1);
        matrix = MatmulBenchmark.randomWeights("w", GgmlType.valueOf(type), rows, cols, random);
        x = new float[tokens * cols];
        for (int i = 0; i < x.length; i++) {
            x[i] = (float) random.nextGaussian();
        }
        out = new float[tokens * rows];
        backend = new CpuBackend(
                threads,
                switch (kernels) {
                    case "java" -> null;
                    case "native" -> NativeKernels.runnable().getFirst();
                    default ->
                        NativeKernels.Variant.valueOf(
                                kernels.toUpperCase(java.util.Locale.ROOT).replace('-', '_'));
                });
    }

    @Benchmark
    public float matMat(Work work) {
        backend.matmul(matrix, x, 0, matrix.cols(), tokens, out, 0, matrix.rows());
        work.gigaMacs += (double) matrix.rows() * matrix.cols() * tokens / 1e9;
        work.gigabytes += matrix.rows() * matrix.rowBytes() / 1e9;
        return out[0];
    }
}
