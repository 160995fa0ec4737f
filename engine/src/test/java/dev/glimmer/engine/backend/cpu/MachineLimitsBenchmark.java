package dev.glimmer.engine.backend.cpu;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.LongVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;
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

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The machine's limits that {@link MatmulBenchmark}'s kernels are held against, measured with the same
 * worker pool: {@code read}, the memory bandwidth of streaming 1 GiB off-heap (more than any cache)
 * with 512-bit loads (the {@code gigabytes} counter, per second), and {@code fma}, the float fma peak
 * of 8 independent chains of 512-bit fmas per thread (the {@code gigaflops} counter: 2 per multiply-add).
 * A mat-vec kernel is at its limit when its GB/s reach {@code read}'s; a mat-mat kernel when its GFLOP/s
 * reach {@code fma}'s.
 *
 * <pre>mvn -o -pl engine -am -Pbenchmark test -DskipTests -Dbenchmark=MachineLimitsBenchmark</pre>
 */
@Fork(value = 1, jvmArgsAppend = {"--add-modules", "jdk.incubator.vector", "-Xmx1g"})
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@State(Scope.Thread)
public class MachineLimitsBenchmark {
    private static final VectorSpecies<Long> L = LongVector.SPECIES_512;
    private static final VectorSpecies<Float> F = FloatVector.SPECIES_512;
    /** Bytes per unit of the read: 1 MiB. */
    private static final int CHUNK = 1 << 20;
    /** Fma steps (8 chains each) per unit of the fma task. */
    private static final int STEPS = 1 << 16;

    @Param({"1", "2"})
    public int threads;

    private MemorySegment data;
    private WorkerPool pool;
    private final AtomicInteger next = new AtomicInteger();
    private final long[] sums = new long[256];
    private final float[] results = new float[256];

    /** GB read and GFLOP computed, reported per second. */
    @AuxCounters(AuxCounters.Type.OPERATIONS)
    @State(Scope.Thread)
    public static class Done {
        public double gigabytes;
        public double gigaflops;
    }

    @Setup(Level.Trial)
    public void setUp() {
        data = Arena.ofAuto().allocate(1L << 30, 64);
        data.fill((byte) 1);
        pool = WorkerPool.shared(threads);
    }

    @Benchmark
    public long read(Done done) {
        int units = (int) (data.byteSize() / CHUNK);
        next.set(0);
        pool.run((worker, workers) -> {
            LongVector a = LongVector.zero(L);
            LongVector b = LongVector.zero(L);
            for (int u = next.getAndIncrement(); u < units; u = next.getAndIncrement()) {
                for (long o = (long) u * CHUNK; o < (long) (u + 1) * CHUNK; o += 128) {
                    a = a.add(LongVector.fromMemorySegment(L, data, o, ByteOrder.LITTLE_ENDIAN));
                    b = b.add(LongVector.fromMemorySegment(L, data, o + 64, ByteOrder.LITTLE_ENDIAN));
                }
            }
            sums[worker] = a.add(b).reduceLanes(VectorOperators.ADD);
        });
        done.gigabytes += data.byteSize() / 1e9;
        return sums[0];
    }

    @Benchmark
    public float fma(Done done) {
        int units = 16 * threads;
        next.set(0);
        pool.run((worker, workers) -> {
            FloatVector x = FloatVector.broadcast(F, 0.999f);
            FloatVector y = FloatVector.broadcast(F, 0.001f);
            FloatVector a0 = FloatVector.broadcast(F, 1f);
            FloatVector a1 = a0;
            FloatVector a2 = a0;
            FloatVector a3 = a0;
            FloatVector a4 = a0;
            FloatVector a5 = a0;
            FloatVector a6 = a0;
            FloatVector a7 = a0;
            for (int u = next.getAndIncrement(); u < units; u = next.getAndIncrement()) {
                for (int i = 0; i < STEPS; i++) {
                    a0 = a0.fma(x, y);
                    a1 = a1.fma(x, y);
                    a2 = a2.fma(x, y);
                    a3 = a3.fma(x, y);
                    a4 = a4.fma(x, y);
                    a5 = a5.fma(x, y);
                    a6 = a6.fma(x, y);
                    a7 = a7.fma(x, y);
                }
            }
            results[worker] = a0.add(a1).add(a2).add(a3).add(a4).add(a5).add(a6).add(a7).reduceLanes(VectorOperators.ADD);
        });
        done.gigaflops += 2.0 * units * STEPS * 8 * F.length() / 1e9;
        return results[0];
    }
}
