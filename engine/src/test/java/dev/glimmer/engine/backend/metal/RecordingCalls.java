package dev.glimmer.engine.backend.metal;

import dev.glimmer.kernels.Size3;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * {@link MetalCalls} that only records: every call with its arguments, in order. Objects it hands
 * out are fake ids from distinct ranges (never dereferenced). {@link #failAt} makes one call throw,
 * as the real calls do when Metal answers nil.
 */
final class RecordingCalls implements MetalCalls {

    static final long ICB = 0x3000_0000L;
    static final long COMMANDS = 0x4000_0000L;
    static final long COMMAND_BUFFER = 0x6000_0000L;
    static final long ENCODER = 0x7000_0000L;

    /** One call: the interface method's name and its arguments. */
    record Call(String method, List<Object> args) {
        Call(String method, Object... args) {
            this(method, List.of(args));
        }
    }

    final List<Call> calls = new ArrayList<>();
    private String failing;
    private int failAt;

    /** The {@code nth} (from 1) call of {@code method} throws a {@link MetalException} after it is recorded. */
    RecordingCalls failAt(String method, int nth) {
        failing = method;
        failAt = nth;
        return this;
    }

    private MemorySegment record(MemorySegment result, String method, Object... args) {
        calls.add(new Call(method, args));
        if (method.equals(failing)
                && calls.stream().filter(c -> c.method().equals(method)).count() == failAt) {
            throw new MetalException(method + " failed");
        }
        return result;
    }

    @Override
    public void release(MemorySegment object) {
        record(null, "release", object.address());
    }

    @Override
    public MemorySegment newIndirectCommandBuffer(int maxCommands, int maxBufferBindings) {
        return record(MemorySegment.ofAddress(ICB), "newIndirectCommandBuffer", maxCommands, maxBufferBindings);
    }

    @Override
    public MemorySegment indirectComputeCommand(MemorySegment icb, int index) {
        return record(MemorySegment.ofAddress(COMMANDS + index), "indirectComputeCommand", icb.address(), index);
    }

    @Override
    public void setComputePipelineState(MemorySegment command, MemorySegment pipeline) {
        record(null, "setComputePipelineState", command.address(), pipeline.address());
    }

    @Override
    public void setKernelBuffer(MemorySegment command, MemorySegment buffer, long offset, int index) {
        record(null, "setKernelBuffer", command.address(), buffer.address(), offset, index);
    }

    @Override
    public void setThreadgroupMemoryLength(MemorySegment command, long length, int index) {
        record(null, "setThreadgroupMemoryLength", command.address(), length, index);
    }

    @Override
    public void concurrentDispatchThreadgroups(MemorySegment command, Size3 grid, Size3 threads) {
        record(null, "concurrentDispatchThreadgroups", command.address(), grid, threads);
    }

    @Override
    public void setBarrier(MemorySegment command) {
        record(null, "setBarrier", command.address());
    }

    @Override
    public MemorySegment commandBuffer(MemorySegment queue) {
        return record(MemorySegment.ofAddress(COMMAND_BUFFER), "commandBuffer", queue.address());
    }

    @Override
    public MemorySegment computeCommandEncoder(MemorySegment commandBuffer) {
        return record(MemorySegment.ofAddress(ENCODER), "computeCommandEncoder", commandBuffer.address());
    }

    // The direct encoder's calls record as the indirect command's above do: one line per interface method.
    @Override
    public void encoderSetComputePipelineState(MemorySegment encoder, MemorySegment pipeline) {
        record(null, "encoderSetComputePipelineState", encoder.address(), pipeline.address());
    }

    @Override
    public void encoderSetBuffer(MemorySegment encoder, MemorySegment buffer, long offset, int index) {
        record(null, "encoderSetBuffer", encoder.address(), buffer.address(), offset, index);
    }

    @Override
    public void encoderSetThreadgroupMemoryLength(MemorySegment encoder, long length, int index) {
        record(null, "encoderSetThreadgroupMemoryLength", encoder.address(), length, index);
    }

    @Override
    public void dispatchThreadgroups(MemorySegment encoder, Size3 grid, Size3 threads) {
        record(null, "dispatchThreadgroups", encoder.address(), grid, threads);
    }

    @Override
    public void dispatchEmptyGrid(MemorySegment encoder) {
        record(null, "dispatchEmptyGrid", encoder.address());
    }

    @Override
    public void useResources(MemorySegment encoder, List<MemorySegment> resources, long usage) {
        record(
                null,
                "useResources",
                encoder.address(),
                resources.stream().map(MemorySegment::address).toList(),
                usage);
    }

    @Override
    public void executeCommandsInBuffer(MemorySegment encoder, MemorySegment icb, int from, int count) {
        record(null, "executeCommandsInBuffer", encoder.address(), icb.address(), from, count);
    }

    @Override
    public void endEncoding(MemorySegment encoder) {
        record(null, "endEncoding", encoder.address());
    }

    @Override
    public void commitAndWait(MemorySegment commandBuffer) {
        record(null, "commitAndWait", commandBuffer.address());
    }
}
