package dev.glimmer.engine.backend.metal;

import static dev.glimmer.engine.backend.metal.MetalMethods.*;

import dev.glimmer.kernels.Size3;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;

/** {@link MetalCalls} as real Objective-C messages. */
final class ObjcMetalCalls implements MetalCalls {

    /** {@code MTLIndirectCommandTypeConcurrentDispatch} (1 << 5). */
    static final long COMMAND_TYPE_CONCURRENT_DISPATCH = 1L << 5;
    /** {@code MTLCommandBufferStatusError}. */
    static final long STATUS_ERROR = 5;

    private final ObjcRuntime rt;
    private final MemorySegment device;

    ObjcMetalCalls(ObjcRuntime rt, MemorySegment device) {
        this.rt = rt;
        this.device = device;
    }

    @Override
    public MemorySegment newIndirectCommandBuffer(int maxCommands, int maxBufferBindings) {
        MemorySegment d = rt.sendForObject(NEW, rt.objcClass("MTLIndirectCommandBufferDescriptor"));
        try {
            rt.send(SET_COMMAND_TYPES, d, COMMAND_TYPE_CONCURRENT_DISPATCH);
            rt.send(SET_INHERIT_PIPELINE_STATE, d, false);
            rt.send(SET_INHERIT_BUFFERS, d, false);
            rt.send(SET_MAX_KERNEL_BUFFER_BIND_COUNT, d, (long) maxBufferBindings);
            MemorySegment icb = rt.sendForObject(NEW_ICB, device, d, (long) maxCommands, 0L);
            if (icb.equals(MemorySegment.NULL)) {
                throw new MetalException(
                        MetalException.Step.ENCODING,
                        "Metal could not create an indirect command buffer of " + maxCommands + " commands");
            }
            return icb;
        } finally {
            rt.release(d);
        }
    }

    @Override
    public void release(MemorySegment object) {
        rt.release(object);
    }

    @Override
    public MemorySegment indirectComputeCommand(MemorySegment icb, int index) {
        return rt.sendForObject(INDIRECT_COMPUTE_COMMAND, icb, (long) index);
    }

    @Override
    public void setComputePipelineState(MemorySegment command, MemorySegment pipeline) {
        rt.send(SET_COMPUTE_PIPELINE_STATE, command, pipeline);
    }

    @Override
    public void setKernelBuffer(MemorySegment command, MemorySegment buffer, long offset, int index) {
        rt.send(SET_KERNEL_BUFFER, command, buffer, offset, (long) index);
    }

    @Override
    public void setThreadgroupMemoryLength(MemorySegment command, long length, int index) {
        rt.send(SET_THREADGROUP_MEMORY_LENGTH, command, length, (long) index);
    }

    @Override
    public void concurrentDispatchThreadgroups(MemorySegment command, Size3 grid, Size3 threads) {
        try (Arena a = Arena.ofConfined()) {
            rt.send(
                    CONCURRENT_DISPATCH,
                    command,
                    size(a, grid.x(), grid.y(), grid.z()),
                    size(a, threads.x(), threads.y(), threads.z()));
        }
    }

    @Override
    public void setBarrier(MemorySegment command) {
        rt.send(SET_BARRIER, command);
    }

    @Override
    public MemorySegment commandBuffer(MemorySegment queue) {
        return rt.sendForObject(COMMAND_BUFFER, queue);
    }

    @Override
    public MemorySegment computeCommandEncoder(MemorySegment commandBuffer) {
        return rt.sendForObject(COMPUTE_COMMAND_ENCODER, commandBuffer);
    }

    // The direct encoder's calls: the indirect command's above again, sent to an encoder (virtual devices,
    // where indirect command buffers misbehave).
    @Override
    public void encoderSetComputePipelineState(MemorySegment encoder, MemorySegment pipeline) {
        rt.send(SET_COMPUTE_PIPELINE_STATE, encoder, pipeline);
    }

    @Override
    public void encoderSetBuffer(MemorySegment encoder, MemorySegment buffer, long offset, int index) {
        rt.send(SET_BUFFER, encoder, buffer, offset, (long) index);
    }

    @Override
    public void encoderSetThreadgroupMemoryLength(MemorySegment encoder, long length, int index) {
        rt.send(SET_THREADGROUP_MEMORY_LENGTH, encoder, length, (long) index);
    }

    @Override
    public void dispatchThreadgroups(MemorySegment encoder, Size3 grid, Size3 threads) {
        try (Arena a = Arena.ofConfined()) {
            rt.send(
                    DISPATCH_THREADGROUPS,
                    encoder,
                    size(a, grid.x(), grid.y(), grid.z()),
                    size(a, threads.x(), threads.y(), threads.z()));
        }
    }

    @Override
    public void dispatchEmptyGrid(MemorySegment encoder) {
        try (Arena a = Arena.ofConfined()) {
            rt.send(DISPATCH_THREADGROUPS, encoder, size(a, 0, 0, 0), size(a, 0, 0, 0));
        }
    }

    @Override
    public void useResources(MemorySegment encoder, List<MemorySegment> resources, long usage) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment array = a.allocate(ValueLayout.ADDRESS, resources.size());
            for (int i = 0; i < resources.size(); i++) {
                array.setAtIndex(ValueLayout.ADDRESS, i, resources.get(i));
            }
            rt.send(USE_RESOURCES, encoder, array, (long) resources.size(), usage);
        }
    }

    @Override
    public void executeCommandsInBuffer(MemorySegment encoder, MemorySegment icb, int from, int count) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment range = a.allocate(NS_RANGE);
            range.set(ValueLayout.JAVA_LONG, 0, from);
            range.set(ValueLayout.JAVA_LONG, 8, count);
            rt.send(EXECUTE_COMMANDS_IN_BUFFER, encoder, icb, range);
        }
    }

    @Override
    public void endEncoding(MemorySegment encoder) {
        rt.send(END_ENCODING, encoder);
    }

    @Override
    public void commitAndWait(MemorySegment commandBuffer) {
        rt.send(COMMIT, commandBuffer);
        rt.send(WAIT_UNTIL_COMPLETED, commandBuffer);
        if ((long) rt.send(STATUS, commandBuffer) == STATUS_ERROR) {
            throw new MetalException(
                    MetalException.Step.RUNNING,
                    "the command buffer failed: "
                            + rt.errorMessage(rt.sendForObject(ERROR, commandBuffer), "no message from Metal"));
        }
    }

    private static MemorySegment size(Arena a, long width, long height, long depth) {
        MemorySegment s = a.allocate(MTL_SIZE);
        s.set(ValueLayout.JAVA_LONG, 0, width);
        s.set(ValueLayout.JAVA_LONG, 8, height);
        s.set(ValueLayout.JAVA_LONG, 16, depth);
        return s;
    }
}
