package dev.glimmer.engine.backend.cuda;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.backend.KernelTimings.KernelTime;
import dev.glimmer.engine.backend.emulated.DecodeModels;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.kernels.ArgStruct;
import dev.glimmer.kernels.decode.BufferSpec;
import dev.glimmer.kernels.decode.CommandList;
import dev.glimmer.kernels.decode.DecodeCommandListBuilder;
import dev.glimmer.kernels.decode.Dispatch;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One sequence decoded on a CUDA device: the decode {@link CommandList} (the one a Metal indirect
 * command buffer encodes) captured once into a CUDA graph over the model's {@link CudaWeights} and
 * this sequence's own KV cache, activations and argument structs in device memory. Per
 * token the host writes the {@code StepArgs} (token, position, KV length) with an ordered copy,
 * launches the graph and reads back the logits or only the greedy token.
 *
 * <p>Not thread-safe: one sequence, one caller at a time (it makes the device's context current
 * on whatever thread calls it).
 */
public final class CudaDecoder implements AutoCloseable {

    private final CudaDevice device;
    private final CudaDriver driver;
    private final CudaKernels kernels;
    private final CommandList list;
    private final int contextSize;
    private final int vocab;
    private final long[] buffers;
    /** Which buffers this sequence allocated (the weights belong to {@link CudaWeights}). */
    private final boolean[] owned;
    private final long[][] bindings;
    private final MemorySegment stream;
    private final MemorySegment graph;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment stepBytes;
    /** Pinned host memory the step's logits or greedy token are copied into on the step's stream. */
    private final MemorySegment readBack;
    /** The logits handed out by {@link #step}, reused from step to step. */
    private final float[] logits;
    private final ArgStruct stepArgs;
    private final long deviceBytes;
    private int position;

    /** A sequence of at most {@code contextSize} positions over uploaded {@code weights}; captures the decode graph. */
    public CudaDecoder(CudaWeights weights, int contextSize) {
        GlmModel model = weights.model();
        this.kernels = weights.kernels();
        this.device = kernels.device();
        this.driver = device.driver();
        this.contextSize = contextSize;
        this.vocab = model.vocabSize();
        this.list = DecodeCommandListBuilder.build(DecodeModels.of(model.file(), model.config()), contextSize);
        this.stepArgs = kernels.library().struct("StepArgs");
        device.makeCurrent();
        buffers = new long[list.buffers().size()];
        owned = new boolean[buffers.length];
        long total = 0;
        try {
            for (int i = 0; i < buffers.length; i++) {
                BufferSpec b = list.buffers().get(i);
                if (b.kind() == BufferSpec.Kind.WEIGHTS) {
                    buffers[i] = weights.pointer(b);
                    continue;
                }
                buffers[i] = driver.alloc(b.bytes());
                owned[i] = true;
                total += Math.max(1, b.bytes());
                if (b.kind() == BufferSpec.Kind.ARGS) {
                    driver.copyToDevice(buffers[i], arena.allocateFrom(ValueLayout.JAVA_BYTE, list.args()), list.args().length);
                } else {
                    driver.memset(buffers[i], (byte) 0, Math.max(1, b.bytes()));
                }
            }
        } catch (RuntimeException e) {
            freeBuffers();
            throw e;
        }
        this.deviceBytes = total;
        bindings = new long[list.dispatches().size()][];
        for (int d = 0; d < bindings.length; d++) {
            List<Dispatch.Binding> bs = list.dispatches().get(d).bindings();
            bindings[d] = new long[bs.size()];
            for (Dispatch.Binding b : bs) {
                bindings[d][b.index()] = buffers[b.buffer()] + b.offset();
            }
        }
        stream = driver.newStream();
        driver.beginCapture(stream);
        enqueueDispatches(null);
        graph = driver.endCaptureAndInstantiate(stream);
        stepBytes = arena.allocate(stepArgs.size());
        readBack = driver.allocHost(4L * vocab);
        logits = new float[vocab];
    }

    /** Every dispatch on the stream in order; with {@code events}, one recorded before the first and after each. */
    private void enqueueDispatches(MemorySegment[] events) {
        enqueueDispatches(bindings.length, events);
    }

    /** The first {@code count} dispatches on the stream in order. */
    private void enqueueDispatches(int count, MemorySegment[] events) {
        if (events != null) {
            driver.record(events[0], stream);
        }
        for (int d = 0; d < count; d++) {
            Dispatch dispatch = list.dispatches().get(d);
            kernels.launch(dispatch.kernel(), stream, dispatch.grid(), dispatch.threads(), bindings[d],
                    dispatch.threadgroupMemory());
            if (events != null) {
                driver.record(events[d + 1], stream);
            }
        }
    }

    public CommandList commandList() {
        return list;
    }

    /** Device memory this sequence allocated: KV cache, activations, arguments. */
    public long deviceBytes() {
        return deviceBytes;
    }

    /** Positions already in the KV cache. */
    public int position() {
        return position;
    }

    /**
     * Continues after the first {@code positions} cached rows (a shared prefix kept, the rest dropped,
     * or rows taken as they are). The attention reads only rows below the KV length, so nothing is cleared.
     */
    public void seek(int positions) {
        if (positions < 0 || positions > contextSize) {
            throw new IllegalArgumentException("position " + positions + " is outside 0.." + contextSize);
        }
        position = positions;
    }

    public int contextSize() {
        return contextSize;
    }

    /**
     * Runs one decode step for {@code token}; returns the logits in an array this decoder reuses (valid
     * until the next step). They come back with the step: copied on its stream into pinned memory.
     */
    public float[] step(int tokenId) {
        run(tokenId, list.logits(), 4L * vocab);
        MemorySegment.copy(readBack, ValueLayout.JAVA_FLOAT, 0, logits, 0, vocab);
        return logits;
    }

    /** Runs one decode step for {@code token}, reading nothing back (a prompt token whose logits nobody needs). */
    public void feed(int tokenId) {
        run(tokenId, 0, 0);
    }

    /** Runs one decode step for {@code token} and returns only the greedy next token (4 bytes read back). */
    public int stepGreedy(int tokenId) {
        run(tokenId, list.token(), 4);
        return readBack.get(ValueLayout.JAVA_INT, 0);
    }

    /** The greedy token the last step's argmax dispatch chose. */
    public int greedyToken() {
        device.makeCurrent();
        driver.copyToHostAsync(readBack, activations() + list.token(), 4, stream);
        driver.synchronize(stream);
        return readBack.get(ValueLayout.JAVA_INT, 0);
    }

    /**
     * Launches the step's graph and, after it on the same stream, copies {@code bytes} of the activations
     * from {@code offset} into {@link #readBack}; one synchronization waits for both.
     */
    private void run(int tokenId, long offset, long bytes) {
        writeStep(tokenId);
        driver.launchGraph(graph, stream);
        if (bytes > 0) {
            driver.copyToHostAsync(readBack, activations() + offset, bytes, stream);
        }
        driver.synchronize(stream);
        position++;
    }

    private long activations() {
        return buffers[list.buffer(BufferSpec.Kind.ACTIVATIONS)];
    }

    private void writeStep(int tokenId) {
        writeStep(tokenId, position);
    }

    private void writeStep(int tokenId, int at) {
        if (tokenId < 0 || tokenId >= vocab) {
            throw new InvalidInputException("token id " + tokenId + " is outside the vocabulary of " + vocab);
        }
        if (at >= contextSize) {
            throw new InvalidInputException("the context of " + contextSize + " positions is full");
        }
        device.makeCurrent();
        byte[] b = stepArgs.pack(Map.of("token", tokenId, "pos", at, "kv_len", at + 1));
        MemorySegment.copy(b, 0, stepBytes, ValueLayout.JAVA_BYTE, 0, b.length);
        driver.copyToDeviceAsync(buffers[list.buffer(BufferSpec.Kind.STEP)], stepBytes, b.length, stream);
    }

    /**
     * Runs the first {@code dispatches} dispatches of the step of {@code token} at position {@code at}
     * (one already decoded with that token: its cache rows are rewritten with the same values) and
     * returns {@code count} floats of command-list buffer {@code buffer} from byte {@code offset}.
     * The position does not move. For locating where a wrong step first leaves the CPU's path.
     */
    public float[] partialStep(int tokenId, int at, int dispatches, int buffer, long offset, int count) {
        writeStep(tokenId, at);
        enqueueDispatches(Math.min(dispatches, bindings.length), null);
        driver.synchronize(stream);
        MemorySegment out = arena.allocate(ValueLayout.JAVA_FLOAT, Math.max(1, count));
        driver.copyToHost(out, buffers[buffer] + offset, 4L * count);
        return out.toArray(ValueLayout.JAVA_FLOAT);
    }

    /**
     * Runs one decode step dispatch by dispatch (no graph) with a CUDA event between every two, and
     * returns the GPU time per kind of dispatch, largest first. The step is a real one (the position advances).
     */
    public List<KernelTime> profileStep(int tokenId) {
        writeStep(tokenId);
        MemorySegment[] events = new MemorySegment[bindings.length + 1];
        for (int i = 0; i < events.length; i++) {
            events[i] = driver.newEvent();
        }
        enqueueDispatches(events);
        driver.synchronize(stream);
        position++;
        Map<String, double[]> perKind = new LinkedHashMap<>();
        for (int d = 0; d < bindings.length; d++) {
            Dispatch dispatch = list.dispatches().get(d);
            double[] t = perKind.computeIfAbsent(kind(dispatch), k -> new double[3]);
            t[0]++;
            t[1] += driver.elapsedMillis(events[d], events[d + 1]);
            t[2] += dispatch.weightReads().stream().mapToLong(Dispatch.WeightRead::bytes).sum();
        }
        for (MemorySegment e : events) {
            driver.destroyEvent(e);
        }
        List<KernelTime> out = new ArrayList<>();
        perKind.forEach((k, t) -> out.add(new KernelTime(k, (int) t[0], t[1], (long) t[2])));
        out.sort((a, b) -> Double.compare(b.millis(), a.millis()));
        return out;
    }

    /** The kernel, and for mat_vec the weight it multiplies (the same kernel runs very different shapes). */
    private static String kind(Dispatch d) {
        if (!d.kernel().equals("mat_vec") || d.weightReads().isEmpty()) {
            return d.kernel();
        }
        return d.kernel() + " " + d.weightReads().getFirst().tensor().replaceFirst("^blk\\.\\d+\\.", "");
    }

    private void freeBuffers() {
        for (int i = 0; i < buffers.length; i++) {
            if (owned[i] && buffers[i] != 0) {
                driver.free(buffers[i]);
                buffers[i] = 0;
            }
        }
    }

    @Override
    public void close() {
        device.makeCurrent();
        driver.synchronize(stream);
        driver.destroyGraph(graph);
        driver.destroyStream(stream);
        freeBuffers();
        driver.freeHost(readBack);
        arena.close();
    }
}
