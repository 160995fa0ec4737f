package dev.glimmer.engine.backend.metal;

import dev.glimmer.kernels.Size3;
import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * The Objective-C calls that encode and run a decode step, one method per message, so that
 * {@link StepEncoder} can be driven by {@link ObjcMetalCalls} on a Mac and by a recorder in a test
 * anywhere. Objects are opaque {@code id}s.
 */
public interface MetalCalls {

    /** {@code MTLResourceUsageRead}. */
    long USAGE_READ = 1;
    /** {@code MTLResourceUsageRead | MTLResourceUsageWrite}. */
    long USAGE_READ_WRITE = 3;

    // Building the indirect command buffer (once).

    /**
     * A new indirect command buffer for {@code maxCommands} {@code ConcurrentDispatch} commands that
     * set their own pipeline and buffers, with at most {@code maxBufferBindings} bindings each (owned).
     */
    MemorySegment newIndirectCommandBuffer(int maxCommands, int maxBufferBindings);

    /** Gives up an owned object (the indirect command buffer). */
    void release(MemorySegment object);

    MemorySegment indirectComputeCommand(MemorySegment icb, int index);

    void setComputePipelineState(MemorySegment command, MemorySegment pipeline);

    void setKernelBuffer(MemorySegment command, MemorySegment buffer, long offset, int index);

    void setThreadgroupMemoryLength(MemorySegment command, long length, int index);

    void concurrentDispatchThreadgroups(MemorySegment command, Size3 grid, Size3 threads);

    void setBarrier(MemorySegment command);

    // Running a step (per token).

    /** A new command buffer of {@code queue} (autoreleased). */
    MemorySegment commandBuffer(MemorySegment queue);

    /** A serial compute encoder (autoreleased): each dispatch encoded on it directly waits for the previous one. */
    MemorySegment computeCommandEncoder(MemorySegment commandBuffer);

    void encoderSetComputePipelineState(MemorySegment encoder, MemorySegment pipeline);

    void encoderSetBuffer(MemorySegment encoder, MemorySegment buffer, long offset, int index);

    void encoderSetThreadgroupMemoryLength(MemorySegment encoder, long length, int index);

    void dispatchThreadgroups(MemorySegment encoder, Size3 grid, Size3 threads);

    /** A dispatch of an empty (0×0×0) grid: the M1/M2 workaround before executing an ICB. */
    void dispatchEmptyGrid(MemorySegment encoder);

    /** Declares {@code resources} resident for the encoder's commands, with {@code usage}. */
    void useResources(MemorySegment encoder, List<MemorySegment> resources, long usage);

    void executeCommandsInBuffer(MemorySegment encoder, MemorySegment icb, int from, int count);

    void endEncoding(MemorySegment encoder);

    /** Commits {@code commandBuffer} and waits; throws {@link MetalException} with Metal's message when it failed. */
    void commitAndWait(MemorySegment commandBuffer);
}
