package dev.glimmer.engine.backend.metal;

import java.lang.foreign.MemorySegment;

/**
 * A kernel's compute pipeline with the limits Metal gives it when it is made: a dispatch of the
 * kernel may not have more threads per threadgroup than {@code maxThreads} (it depends on the
 * registers the compiled kernel needs, so a register-heavy kernel can get less than the device's
 * 1024), and its threadgroup memory comes on top of the kernel's own {@code staticMemory}.
 *
 * @param state        the {@code MTLComputePipelineState}
 * @param maxThreads   its {@code maxTotalThreadsPerThreadgroup}
 * @param staticMemory its {@code staticThreadgroupMemoryLength} in bytes
 */
public record Pipeline(MemorySegment state, long maxThreads, long staticMemory) {}
