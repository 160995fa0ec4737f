package dev.glimmer.engine.backend.metal;

import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.decode.BufferSpec;
import dev.glimmer.kernels.decode.CommandList;
import dev.glimmer.kernels.decode.Dispatch;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;

/**
 * Encodes a decode {@link CommandList} once and runs it per token (docs/KERNELS.md §4).
 *
 * <p>In {@link Mode#INDIRECT} and {@link Mode#INDIRECT_WITH_EMPTY_DISPATCHES} every dispatch becomes
 * one {@code ConcurrentDispatch} command of an indirect command buffer, with the list's pipeline,
 * bindings, threadgroup memory, grid and barrier; a token is then one command buffer whose compute
 * encoder declares every buffer resident and executes the whole range. {@link Mode#DIRECT} (virtual
 * devices, where indirect command buffers misbehave) encodes the same dispatches on a serial encoder
 * per token instead, which orders them as the barriers would.
 *
 * <p>Before anything is encoded, every dispatch is checked against the limits of its pipeline and
 * device: a threadgroup larger than the pipeline's {@code maxTotalThreadsPerThreadgroup} or more
 * threadgroup memory than the device has would make the whole step invalid on the GPU, so it fails
 * here, naming the kernel. The encoder owns its indirect command buffer and releases it on close,
 * or at once when encoding fails part-way.
 */
public final class StepEncoder implements AutoCloseable {

    /** Binding offsets of indirect commands are 32-bit. */
    static final long MAX_BINDING_OFFSET = (1L << 32) - 1;

    /** How a step reaches the GPU. */
    public enum Mode {
        /** Execute the prebuilt indirect command buffer. */
        INDIRECT,
        /** The same, after one empty dispatch of each pipeline in the encoder: M1/M2 drivers crash without it. */
        INDIRECT_WITH_EMPTY_DISPATCHES,
        /** Encode the dispatches one by one every token (virtual devices). */
        DIRECT
    }

    private final MetalCalls calls;
    private final CommandList list;
    private final List<MemorySegment> buffers;
    private final List<MemorySegment> pipelines;
    private final List<MemorySegment> distinctPipelines;
    private final List<MemorySegment> weightBuffers = new ArrayList<>();
    private final List<MemorySegment> writableBuffers = new ArrayList<>();
    private final Mode mode;
    private final MemorySegment icb;

    /**
     * @param buffers              the Metal buffer of each of the list's {@link CommandList#buffers()}, same order
     * @param pipelines            the pipeline of each kernel the list dispatches
     * @param maxThreadgroupMemory the device's {@code maxThreadgroupMemoryLength}
     * @throws MetalException when a dispatch exceeds its pipeline's or the device's limits, or Metal refuses a call
     */
    public StepEncoder(
            MetalCalls calls,
            CommandList list,
            List<MemorySegment> buffers,
            Map<String, Pipeline> pipelines,
            long maxThreadgroupMemory,
            Mode mode) {
        if (buffers.size() != list.buffers().size()) {
            throw new IllegalArgumentException(
                    list.buffers().size() + " buffers in the list, " + buffers.size() + " given");
        }
        this.calls = calls;
        this.list = list;
        this.buffers = List.copyOf(buffers);
        this.mode = mode;
        this.pipelines = new ArrayList<>();
        LinkedHashSet<MemorySegment> distinct = new LinkedHashSet<>();
        for (Dispatch d : list.dispatches()) {
            Pipeline p = pipelines.get(d.kernel());
            if (p == null) {
                throw new IllegalArgumentException("no pipeline for kernel " + d.kernel());
            }
            this.pipelines.add(p.state());
            distinct.add(p.state());
            check(d);
            checkLimits(d, p, maxThreadgroupMemory);
        }
        this.distinctPipelines = List.copyOf(distinct);
        for (int i = 0; i < list.buffers().size(); i++) {
            (list.buffers().get(i).kind() == BufferSpec.Kind.WEIGHTS ? weightBuffers : writableBuffers)
                    .add(buffers.get(i));
        }
        this.icb = mode == Mode.DIRECT ? MemorySegment.NULL : encodeIndirect();
    }

    public Mode mode() {
        return mode;
    }

    private static void check(Dispatch d) {
        if (d.bindings().size() > Geometry.MAX_BUFFER_BINDINGS) {
            throw new IllegalArgumentException(d.kernel() + " binds "
                    + d.bindings().size() + " buffers; an indirect command can bind " + Geometry.MAX_BUFFER_BINDINGS);
        }
        for (Dispatch.Binding b : d.bindings()) {
            if (b.offset() < 0 || b.offset() > MAX_BINDING_OFFSET) {
                throw new IllegalArgumentException(d.kernel() + " binds buffer " + b.buffer() + " at offset "
                        + b.offset() + ", beyond the 32-bit offsets of indirect commands");
            }
        }
        for (int length : d.threadgroupMemory()) {
            if (length % 16 != 0) {
                throw new IllegalArgumentException(d.kernel() + " asks for " + length
                        + " bytes of threadgroup memory; Metal needs a multiple of 16");
            }
        }
    }

    private static void checkLimits(Dispatch d, Pipeline p, long maxThreadgroupMemory) {
        long threads = (long) d.threads().x() * d.threads().y() * d.threads().z();
        if (threads > p.maxThreads()) {
            throw new MetalException(
                    MetalException.Step.ENCODING,
                    "kernel " + d.kernel() + " is dispatched with " + threads
                            + " threads per threadgroup, but its pipeline allows at most " + p.maxThreads()
                            + " on this GPU");
        }
        long memory = d.threadgroupMemoryBytes() + p.staticMemory();
        if (memory > maxThreadgroupMemory) {
            throw new MetalException(
                    MetalException.Step.ENCODING,
                    "kernel " + d.kernel() + " needs " + memory
                            + " bytes of threadgroup memory (" + p.staticMemory()
                            + " of them static), but this GPU has "
                            + maxThreadgroupMemory);
        }
    }

    private MemorySegment encodeIndirect() {
        int maxBindings = list.dispatches().stream()
                .mapToInt(d -> d.bindings().size())
                .max()
                .orElse(0);
        MemorySegment buffer = calls.newIndirectCommandBuffer(list.dispatches().size(), Math.max(1, maxBindings));
        try {
            encodeCommands(buffer);
        } catch (RuntimeException e) {
            calls.release(buffer);
            throw e;
        }
        return buffer;
    }

    private void encodeCommands(MemorySegment buffer) {
        for (int i = 0; i < list.dispatches().size(); i++) {
            Dispatch d = list.dispatches().get(i);
            MemorySegment command = calls.indirectComputeCommand(buffer, i);
            calls.setComputePipelineState(command, pipelines.get(i));
            for (Dispatch.Binding b : d.bindings()) {
                calls.setKernelBuffer(command, buffers.get(b.buffer()), b.offset(), b.index());
            }
            int[] memory = d.threadgroupMemory();
            for (int m = 0; m < memory.length; m++) {
                calls.setThreadgroupMemoryLength(command, memory[m], m);
            }
            calls.concurrentDispatchThreadgroups(command, d.grid(), d.threads());
            if (d.barrier()) {
                calls.setBarrier(command);
            }
        }
    }

    /** The indirect command buffer, NULL in {@link Mode#DIRECT}. */
    public MemorySegment indirectCommandBuffer() {
        return icb;
    }

    /** Releases the indirect command buffer. */
    @Override
    public void close() {
        if (!icb.equals(MemorySegment.NULL)) {
            calls.release(icb);
        }
    }

    /**
     * Runs one step on {@code queue} and waits for it. The caller has written the step buffer and
     * holds an autorelease pool for the command buffer and encoder.
     */
    public void run(MemorySegment queue) {
        run(queue, list.dispatches().size());
    }

    /** Runs only the first {@code dispatches} dispatches of the step (diagnosis). */
    public void run(MemorySegment queue, int dispatches) {
        if (dispatches < 1 || dispatches > list.dispatches().size()) {
            throw new IllegalArgumentException(
                    "a step has 1.." + list.dispatches().size() + " dispatches, not " + dispatches);
        }
        MemorySegment commandBuffer = calls.commandBuffer(queue);
        MemorySegment encoder = calls.computeCommandEncoder(commandBuffer);
        if (mode == Mode.DIRECT) {
            encodeDirect(encoder, dispatches);
        } else {
            if (mode == Mode.INDIRECT_WITH_EMPTY_DISPATCHES) {
                for (MemorySegment p : distinctPipelines) {
                    calls.encoderSetComputePipelineState(encoder, p);
                    calls.dispatchEmptyGrid(encoder);
                }
            }
            // The GPU does not track what an indirect command buffer touches: declare it all.
            calls.useResources(encoder, weightBuffers, MetalCalls.USAGE_READ);
            calls.useResources(encoder, writableBuffers, MetalCalls.USAGE_READ_WRITE);
            calls.executeCommandsInBuffer(encoder, icb, 0, dispatches);
        }
        calls.endEncoding(encoder);
        calls.commitAndWait(commandBuffer);
    }

    private void encodeDirect(MemorySegment encoder, int dispatches) {
        for (int i = 0; i < dispatches; i++) {
            Dispatch d = list.dispatches().get(i);
            calls.encoderSetComputePipelineState(encoder, pipelines.get(i));
            for (Dispatch.Binding b : d.bindings()) {
                calls.encoderSetBuffer(encoder, buffers.get(b.buffer()), b.offset(), b.index());
            }
            int[] memory = d.threadgroupMemory();
            for (int m = 0; m < memory.length; m++) {
                calls.encoderSetThreadgroupMemoryLength(encoder, memory[m], m);
            }
            calls.dispatchThreadgroups(encoder, d.grid(), d.threads());
        }
    }
}
