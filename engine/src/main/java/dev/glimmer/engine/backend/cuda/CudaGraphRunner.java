package dev.glimmer.engine.backend.cuda;

import dev.glimmer.engine.backend.commandlist.CommandListPool;
import dev.glimmer.engine.backend.commandlist.ListRunner;
import dev.glimmer.kernels.ArgStruct;
import dev.glimmer.kernels.decode.BufferSpec;
import dev.glimmer.kernels.decode.CommandList;
import dev.glimmer.kernels.decode.Dispatch;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The command lists of a {@link CommandListPool} as CUDA graphs: each list is captured once into a graph over the
 * model's {@link CudaWeights}, the KV pool every list shares and the list's own activations and argument structs in
 * device memory. A run writes the {@code StepArgs} with an ordered copy from pinned memory on the runner's stream,
 * launches the graph (or, for the self-test's partial steps, the first dispatches one by one) and queues the reads
 * after it into pinned host memory; {@link #finish} waits for the stream and a {@link Fence} for what was queued before
 * it, so that the host can work while the device computes.
 *
 * <p>Not thread-safe: one caller at a time (it makes the device's context current on whatever thread writes a step or
 * waits).
 */
public final class CudaGraphRunner implements ListRunner {

    final CudaDevice device;
    final CudaDriver driver;
    private final CudaKernels kernels;
    private final CudaWeights weights;
    private final boolean ownsWeights;
    private final ArgStruct stepArgs;
    private final Arena arena = Arena.ofShared();
    final MemorySegment stream;
    /** The KV cache and greedy token buffers, shared by every graph of this runner. */
    private final Map<BufferSpec, Long> pooled = new HashMap<>();

    private final List<Graph> graphs = new ArrayList<>();
    private final List<MemorySegment> pinned = new ArrayList<>();
    private final List<MemorySegment> events = new ArrayList<>();

    /** Graphs over {@code weights}; closing the runner closes them too where it {@code ownsWeights} (the self-test's). */
    public CudaGraphRunner(CudaWeights weights, boolean ownsWeights) {
        this.weights = weights;
        this.ownsWeights = ownsWeights;
        this.kernels = weights.kernels();
        this.device = kernels.device();
        this.driver = device.driver();
        this.stepArgs = kernels.library().struct("StepArgs");
        device.makeCurrent();
        this.stream = driver.newStream();
    }

    /** One command list in device memory and its captured graph. */
    final class Graph implements Bound {
        final CommandList list;
        final long[] buffers;
        /** Which buffers this graph allocated (the weights belong to {@link CudaWeights}, the pooled ones to the runner). */
        final boolean[] owned;

        final long[][] bindings;
        /**
         * Pinned host staging of the StepArgs, two used in turn: a copy from pageable memory may wait for the stream
         * (the driver stages it), which would keep the host from queueing a step while the one before runs. A buffer is
         * written again two writes later: by then the host has waited for the step that copied it (a chained decode
         * queues one step ahead of the one it waits for; everything else waits for each step).
         */
        private final MemorySegment[] stepBytes = new MemorySegment[2];

        private int stepWrites;

        MemorySegment exec;

        Graph(CommandList list) {
            this.list = list;
            buffers = new long[list.buffers().size()];
            owned = new boolean[buffers.length];
            try {
                for (int i = 0; i < buffers.length; i++) {
                    BufferSpec b = list.buffers().get(i);
                    if (b.kind() == BufferSpec.Kind.WEIGHTS) {
                        buffers[i] = weights.pointer(b);
                    } else if (b.kind().pooled()) {
                        buffers[i] = pooled.computeIfAbsent(b, spec -> zeroed(spec.bytes()));
                    } else {
                        buffers[i] = driver.alloc(b.bytes());
                        owned[i] = true;
                        if (b.kind() == BufferSpec.Kind.ARGS) {
                            driver.copyToDevice(
                                    buffers[i],
                                    arena.allocateFrom(ValueLayout.JAVA_BYTE, list.args()),
                                    list.args().length);
                        } else {
                            driver.memset(buffers[i], (byte) 0, Math.max(1, b.bytes()));
                        }
                    }
                }
            } catch (RuntimeException e) {
                free();
                throw e;
            }
            bindings = new long[list.dispatches().size()][];
            for (int d = 0; d < bindings.length; d++) {
                List<Dispatch.Binding> bs = list.dispatches().get(d).bindings();
                bindings[d] = new long[bs.size()];
                for (Dispatch.Binding b : bs) {
                    bindings[d][b.index()] = buffers[b.buffer()] + b.offset();
                }
            }
            for (int i = 0; i < stepBytes.length; i++) {
                stepBytes[i] = hostBuffer((long) list.tokens() * stepArgs.size());
            }
        }

        /** A graph of the list's dispatches but those marked in {@code skip} (the profiler's); the caller destroys it. */
        MemorySegment capture(boolean[] skip) {
            driver.beginCapture(stream);
            for (int d = 0; d < bindings.length; d++) {
                if (!skip[d]) {
                    enqueue(d);
                }
            }
            return driver.endCaptureAndInstantiate(stream);
        }

        /** Dispatch {@code d} on the stream. */
        void enqueue(int d) {
            Dispatch dispatch = list.dispatches().get(d);
            kernels.launch(
                    dispatch.kernel(),
                    stream,
                    dispatch.grid(),
                    dispatch.threads(),
                    bindings[d],
                    dispatch.threadgroupMemory());
        }

        @Override
        public void writeSteps(byte[] steps) {
            device.makeCurrent();
            MemorySegment staging = stepBytes[stepWrites++ % stepBytes.length];
            MemorySegment.copy(steps, 0, staging, ValueLayout.JAVA_BYTE, 0, steps.length);
            driver.copyToDeviceAsync(buffers[list.buffer(BufferSpec.Kind.STEP)], staging, steps.length, stream);
        }

        /** The captured graph for the whole list, else its first dispatches one by one. */
        @Override
        public void run(int dispatches) {
            if (dispatches == bindings.length) {
                driver.launchGraph(exec, stream);
            } else {
                for (int d = 0; d < dispatches; d++) {
                    enqueue(d);
                }
            }
        }

        /** Queued on the stream after the run: {@code into} must be {@link #hostBuffer} memory. */
        @Override
        public void read(int buffer, long offset, MemorySegment into) {
            driver.copyToHostAsync(into, buffers[buffer] + offset, into.byteSize(), stream);
        }

        /** Queued on the stream: {@code from} must be {@link #hostBuffer} memory, unchanged until {@link #finish}. */
        @Override
        public void write(int buffer, long offset, MemorySegment from) {
            device.makeCurrent();
            driver.copyToDeviceAsync(buffers[buffer] + offset, from, from.byteSize(), stream);
        }

        void free() {
            if (exec != null) {
                driver.destroyGraph(exec);
                exec = null;
            }
            for (int i = 0; i < buffers.length; i++) {
                if (owned[i] && buffers[i] != 0) {
                    driver.free(buffers[i]);
                    buffers[i] = 0;
                }
            }
        }
    }

    private long zeroed(long bytes) {
        long b = driver.alloc(bytes);
        driver.memset(b, (byte) 0, Math.max(1, bytes));
        return b;
    }

    @Override
    public Bound bind(CommandList list) {
        device.makeCurrent();
        Graph g = new Graph(list);
        graphs.add(g);
        g.exec = g.capture(new boolean[g.bindings.length]);
        return g;
    }

    @Override
    public MemorySegment hostBuffer(long bytes) {
        device.makeCurrent();
        MemorySegment host = driver.allocHost(bytes);
        pinned.add(host);
        return host;
    }

    @Override
    public void finish() {
        device.makeCurrent();
        driver.synchronize(stream);
    }

    /** An event on the runner's stream (without timing, the cheaper kind). */
    @Override
    public Fence fence() {
        device.makeCurrent();
        MemorySegment event = driver.newEvent(false);
        events.add(event);
        return new Fence() {
            @Override
            public void set() {
                device.makeCurrent();
                driver.record(event, stream);
            }

            @Override
            public void await() {
                driver.synchronizeEvent(event);
            }
        };
    }

    @Override
    public Optional<Profiler> profiler() {
        return Optional.of(new CudaProfiler(this));
    }

    /** The graph {@code bound} is, one of this runner's. */
    Graph graph(Bound bound) {
        return graphs.stream()
                .filter(g -> g == bound)
                .findFirst()
                .orElseThrow(() -> new IllegalArgumentException("a list of another runner"));
    }

    @Override
    public void close() {
        device.makeCurrent();
        driver.synchronize(stream);
        for (Graph g : graphs) {
            g.free();
        }
        for (long b : pooled.values()) {
            driver.free(b);
        }
        events.forEach(driver::destroyEvent);
        driver.destroyStream(stream);
        for (MemorySegment host : pinned) {
            driver.freeHost(host);
        }
        arena.close();
        if (ownsWeights) {
            weights.close();
        }
    }
}
