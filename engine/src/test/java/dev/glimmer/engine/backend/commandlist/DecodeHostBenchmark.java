package dev.glimmer.engine.backend.commandlist;

import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import dev.glimmer.kernels.decode.CommandList;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The Java side of a GPU decode step: a {@link CommandListPool} of 16 slots over a runner whose runs, reads and
 * writes do nothing, so that what is timed is the pool's own work per step (the step arguments, the choice of list,
 * the reads queued, the readouts, the picks' bookkeeping), for one row and for 16, one step at a time
 * ({@link SequencePool#step}) and chained ({@link SequencePool#decode}). On a device the driver calls and the time
 * the device waits come on top (docs/BENCHMARKS.md, "The host between decode steps").
 *
 * <pre>mvn -o -pl engine -am -Pbenchmark test -DskipTests -Dbenchmark=DecodeHostBenchmark</pre>
 */
@Fork(
        value = 1,
        jvmArgsAppend = {"--add-modules", "jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED", "-Xmx2g"})
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@State(Scope.Thread)
public class DecodeHostBenchmark {

    /** Steps of one chained {@link SequencePool#decode}. */
    private static final int CHAIN = 64;

    private static final int CAPACITY = 1 << 16;

    @Param({"1", "16"})
    public int rows;

    private GlmModel model;
    private CommandListPool pool;
    private List<SequencePool.Sequence> sequences;
    private SequencePool.Readout[] greedy;
    private int[] tokens;
    private int[] left;

    /** Runs, reads and writes nothing; reads leave the host memory as it was (zero: token 0). */
    private static final class IdleRunner implements ListRunner {
        private final Arena arena = Arena.ofShared();

        @Override
        public Bound bind(CommandList list) {
            return new Bound() {
                @Override
                public void writeSteps(byte[] steps) {}

                @Override
                public void run(int dispatches) {}

                @Override
                public void read(int buffer, long offset, MemorySegment into) {}

                @Override
                public void write(int buffer, long offset, MemorySegment from) {}
            };
        }

        @Override
        public MemorySegment hostBuffer(long bytes) {
            return arena.allocate(bytes, 64);
        }

        @Override
        public void finish() {}

        @Override
        public Fence fence() {
            return Fence.DONE;
        }

        @Override
        public void close() {
            arena.close();
        }
    }

    @Setup(Level.Trial)
    public void setUp() throws IOException {
        model = GlmModel.open(Oracle.model("tiny-q4_0"));
        pool = new CommandListPool(model, new IdleRunner(), 16, CAPACITY, 4);
        sequences = new ArrayList<>();
        for (int i = 0; i < rows; i++) {
            sequences.add(pool.open());
        }
        greedy = new SequencePool.Readout[rows];
        Arrays.fill(greedy, SequencePool.Readout.GREEDY);
        tokens = new int[rows];
        left = new int[rows];
    }

    /** Back to position 0 before the context fills. */
    private void rewindWhenFull() {
        if (sequences.getFirst().position() + CHAIN + 1 > CAPACITY) {
            sequences.forEach(s -> s.truncate(0));
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        sequences.forEach(SequencePool.Sequence::close);
        pool.close();
        model.close();
    }

    @Benchmark
    public SequencePool.Next[] oneStep() {
        rewindWhenFull();
        return pool.step(sequences, tokens, greedy);
    }

    @Benchmark
    @OperationsPerInvocation(CHAIN)
    public int[] chainedSteps() {
        rewindWhenFull();
        Arrays.fill(left, CHAIN);
        pool.decode(sequences, tokens, greedy, (row, next) -> --left[row] > 0 ? next.greedyToken() : SequencePool.STOP);
        return left;
    }
}
