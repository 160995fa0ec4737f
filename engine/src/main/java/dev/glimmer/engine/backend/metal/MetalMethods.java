package dev.glimmer.engine.backend.metal;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BOOLEAN;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.util.List;

/**
 * Every Objective-C method the Metal backend sends, with its argument and result layouts (arm64
 * macOS): {@code id}, {@code Class}, pointers and blocks are {@code ADDRESS}; {@code NSUInteger},
 * {@code NSInteger} and the {@code NSUInteger}-backed Metal enums and option sets are
 * {@code JAVA_LONG}; {@code BOOL} is {@code JAVA_BOOLEAN}; {@code MTLSize} and {@code NSRange} are
 * passed by value as the structs below. Calls go through these constants only, so this table is
 * the whole surface a test has to compare with Apple's declarations.
 */
public final class MetalMethods {

    /** {@code MTLSize}: width, height, depth, each an {@code NSUInteger}. */
    public static final StructLayout MTL_SIZE = MemoryLayout.structLayout(
                    JAVA_LONG.withName("width"), JAVA_LONG.withName("height"), JAVA_LONG.withName("depth"))
            .withName("MTLSize");
    /** {@code NSRange}: location and length, each an {@code NSUInteger}. */
    public static final StructLayout NS_RANGE = MemoryLayout.structLayout(
                    JAVA_LONG.withName("location"), JAVA_LONG.withName("length"))
            .withName("NSRange");

    private static final ValueLayout NSUINTEGER = JAVA_LONG;
    private static final ValueLayout NSINTEGER = JAVA_LONG;

    // NSObject and Foundation
    public static final ObjcMethod NEW = ObjcMethod.of("new", ADDRESS);
    public static final ObjcMethod RELEASE = ObjcMethod.ofVoid("release");
    public static final ObjcMethod STRING_WITH_UTF8 = ObjcMethod.of("stringWithUTF8String:", ADDRESS, ADDRESS);
    public static final ObjcMethod UTF8_STRING = ObjcMethod.of("UTF8String", ADDRESS);
    public static final ObjcMethod LOCALIZED_DESCRIPTION = ObjcMethod.of("localizedDescription", ADDRESS);
    public static final ObjcMethod RESPONDS_TO_SELECTOR = ObjcMethod.of("respondsToSelector:", JAVA_BOOLEAN, ADDRESS);

    // MTLDevice
    public static final ObjcMethod NAME = ObjcMethod.of("name", ADDRESS);
    public static final ObjcMethod SUPPORTS_FAMILY = ObjcMethod.of("supportsFamily:", JAVA_BOOLEAN, NSINTEGER);
    public static final ObjcMethod MAX_BUFFER_LENGTH = ObjcMethod.of("maxBufferLength", NSUINTEGER);
    public static final ObjcMethod MAX_THREADGROUP_MEMORY_LENGTH =
            ObjcMethod.of("maxThreadgroupMemoryLength", NSUINTEGER);
    public static final ObjcMethod RECOMMENDED_MAX_WORKING_SET_SIZE =
            ObjcMethod.of("recommendedMaxWorkingSetSize", JAVA_LONG);
    public static final ObjcMethod NEW_COMMAND_QUEUE = ObjcMethod.of("newCommandQueue", ADDRESS);
    public static final ObjcMethod NEW_BUFFER_WITH_LENGTH =
            ObjcMethod.of("newBufferWithLength:options:", ADDRESS, NSUINTEGER, NSUINTEGER);
    public static final ObjcMethod NEW_BUFFER_NO_COPY = ObjcMethod.of(
            "newBufferWithBytesNoCopy:length:options:deallocator:", ADDRESS, ADDRESS, NSUINTEGER, NSUINTEGER, ADDRESS);
    public static final ObjcMethod NEW_LIBRARY_WITH_SOURCE =
            ObjcMethod.of("newLibraryWithSource:options:error:", ADDRESS, ADDRESS, ADDRESS, ADDRESS);
    public static final ObjcMethod NEW_PIPELINE_WITH_DESCRIPTOR = ObjcMethod.of(
            "newComputePipelineStateWithDescriptor:options:reflection:error:",
            ADDRESS,
            ADDRESS,
            NSUINTEGER,
            ADDRESS,
            ADDRESS);
    public static final ObjcMethod NEW_ICB = ObjcMethod.of(
            "newIndirectCommandBufferWithDescriptor:maxCommandCount:options:",
            ADDRESS,
            ADDRESS,
            NSUINTEGER,
            NSUINTEGER);

    public static final ObjcMethod NEW_RESIDENCY_SET =
            ObjcMethod.of("newResidencySetWithDescriptor:error:", ADDRESS, ADDRESS, ADDRESS);

    // MTLResidencySetDescriptor, MTLResidencySet (macOS 15)
    public static final ObjcMethod SET_INITIAL_CAPACITY = ObjcMethod.ofVoid("setInitialCapacity:", NSUINTEGER);
    public static final ObjcMethod ADD_ALLOCATION = ObjcMethod.ofVoid("addAllocation:", ADDRESS);
    public static final ObjcMethod REQUEST_RESIDENCY = ObjcMethod.ofVoid("requestResidency");
    public static final ObjcMethod END_RESIDENCY = ObjcMethod.ofVoid("endResidency");

    // MTLCompileOptions (property setter)
    public static final ObjcMethod SET_FAST_MATH_ENABLED = ObjcMethod.ofVoid("setFastMathEnabled:", JAVA_BOOLEAN);

    // MTLComputePipelineState (properties)
    public static final ObjcMethod MAX_TOTAL_THREADS_PER_THREADGROUP =
            ObjcMethod.of("maxTotalThreadsPerThreadgroup", NSUINTEGER);
    public static final ObjcMethod STATIC_THREADGROUP_MEMORY_LENGTH =
            ObjcMethod.of("staticThreadgroupMemoryLength", NSUINTEGER);

    // MTLBuffer
    public static final ObjcMethod CONTENTS = ObjcMethod.of("contents", ADDRESS);

    // MTLLibrary
    public static final ObjcMethod NEW_FUNCTION_WITH_NAME = ObjcMethod.of("newFunctionWithName:", ADDRESS, ADDRESS);

    // MTLComputePipelineDescriptor
    public static final ObjcMethod SET_COMPUTE_FUNCTION = ObjcMethod.ofVoid("setComputeFunction:", ADDRESS);
    public static final ObjcMethod SET_SUPPORT_ICB =
            ObjcMethod.ofVoid("setSupportIndirectCommandBuffers:", JAVA_BOOLEAN);

    // MTLIndirectCommandBufferDescriptor
    public static final ObjcMethod SET_COMMAND_TYPES = ObjcMethod.ofVoid("setCommandTypes:", NSUINTEGER);
    public static final ObjcMethod SET_INHERIT_PIPELINE_STATE =
            ObjcMethod.ofVoid("setInheritPipelineState:", JAVA_BOOLEAN);
    public static final ObjcMethod SET_INHERIT_BUFFERS = ObjcMethod.ofVoid("setInheritBuffers:", JAVA_BOOLEAN);
    public static final ObjcMethod SET_MAX_KERNEL_BUFFER_BIND_COUNT =
            ObjcMethod.ofVoid("setMaxKernelBufferBindCount:", NSUINTEGER);

    // MTLIndirectCommandBuffer and MTLIndirectComputeCommand
    public static final ObjcMethod INDIRECT_COMPUTE_COMMAND =
            ObjcMethod.of("indirectComputeCommandAtIndex:", ADDRESS, NSUINTEGER);
    /** Both MTLIndirectComputeCommand and MTLComputeCommandEncoder declare it with the same types. */
    public static final ObjcMethod SET_COMPUTE_PIPELINE_STATE = ObjcMethod.ofVoid("setComputePipelineState:", ADDRESS);

    public static final ObjcMethod SET_KERNEL_BUFFER =
            ObjcMethod.ofVoid("setKernelBuffer:offset:atIndex:", ADDRESS, NSUINTEGER, NSUINTEGER);
    /** Both MTLIndirectComputeCommand and MTLComputeCommandEncoder declare it with the same types. */
    public static final ObjcMethod SET_THREADGROUP_MEMORY_LENGTH =
            ObjcMethod.ofVoid("setThreadgroupMemoryLength:atIndex:", NSUINTEGER, NSUINTEGER);

    public static final ObjcMethod CONCURRENT_DISPATCH =
            ObjcMethod.ofVoid("concurrentDispatchThreadgroups:threadsPerThreadgroup:", MTL_SIZE, MTL_SIZE);
    public static final ObjcMethod SET_BARRIER = ObjcMethod.ofVoid("setBarrier");

    // MTLCommandQueue and MTLCommandBuffer
    public static final ObjcMethod COMMAND_BUFFER = ObjcMethod.of("commandBuffer", ADDRESS);
    public static final ObjcMethod ADD_RESIDENCY_SET = ObjcMethod.ofVoid("addResidencySet:", ADDRESS);
    public static final ObjcMethod REMOVE_RESIDENCY_SET = ObjcMethod.ofVoid("removeResidencySet:", ADDRESS);
    /** Both MTLCommandBuffer and MTLResidencySet declare it with the same types. */
    public static final ObjcMethod COMPUTE_COMMAND_ENCODER = ObjcMethod.of("computeCommandEncoder", ADDRESS);

    public static final ObjcMethod COMMIT = ObjcMethod.ofVoid("commit");
    public static final ObjcMethod WAIT_UNTIL_COMPLETED = ObjcMethod.ofVoid("waitUntilCompleted");
    public static final ObjcMethod STATUS = ObjcMethod.of("status", NSUINTEGER);
    public static final ObjcMethod ERROR = ObjcMethod.of("error", ADDRESS);

    // MTLComputeCommandEncoder
    public static final ObjcMethod SET_BUFFER =
            ObjcMethod.ofVoid("setBuffer:offset:atIndex:", ADDRESS, NSUINTEGER, NSUINTEGER);
    public static final ObjcMethod DISPATCH_THREADGROUPS =
            ObjcMethod.ofVoid("dispatchThreadgroups:threadsPerThreadgroup:", MTL_SIZE, MTL_SIZE);
    public static final ObjcMethod USE_RESOURCES =
            ObjcMethod.ofVoid("useResources:count:usage:", ADDRESS, NSUINTEGER, NSUINTEGER);
    public static final ObjcMethod EXECUTE_COMMANDS_IN_BUFFER =
            ObjcMethod.ofVoid("executeCommandsInBuffer:withRange:", ADDRESS, NS_RANGE);
    public static final ObjcMethod END_ENCODING = ObjcMethod.ofVoid("endEncoding");

    /** Every method above. */
    public static final List<ObjcMethod> ALL = List.of(
            NEW,
            RELEASE,
            STRING_WITH_UTF8,
            UTF8_STRING,
            LOCALIZED_DESCRIPTION,
            RESPONDS_TO_SELECTOR,
            NEW_RESIDENCY_SET,
            SET_INITIAL_CAPACITY,
            ADD_ALLOCATION,
            REQUEST_RESIDENCY,
            END_RESIDENCY,
            ADD_RESIDENCY_SET,
            REMOVE_RESIDENCY_SET,
            NAME,
            SUPPORTS_FAMILY,
            MAX_BUFFER_LENGTH,
            MAX_THREADGROUP_MEMORY_LENGTH,
            RECOMMENDED_MAX_WORKING_SET_SIZE,
            SET_FAST_MATH_ENABLED,
            MAX_TOTAL_THREADS_PER_THREADGROUP,
            STATIC_THREADGROUP_MEMORY_LENGTH,
            NEW_COMMAND_QUEUE,
            NEW_BUFFER_WITH_LENGTH,
            NEW_BUFFER_NO_COPY,
            NEW_LIBRARY_WITH_SOURCE,
            NEW_PIPELINE_WITH_DESCRIPTOR,
            NEW_ICB,
            CONTENTS,
            NEW_FUNCTION_WITH_NAME,
            SET_COMPUTE_FUNCTION,
            SET_SUPPORT_ICB,
            SET_COMMAND_TYPES,
            SET_INHERIT_PIPELINE_STATE,
            SET_INHERIT_BUFFERS,
            SET_MAX_KERNEL_BUFFER_BIND_COUNT,
            INDIRECT_COMPUTE_COMMAND,
            SET_COMPUTE_PIPELINE_STATE,
            SET_KERNEL_BUFFER,
            SET_THREADGROUP_MEMORY_LENGTH,
            CONCURRENT_DISPATCH,
            SET_BARRIER,
            COMMAND_BUFFER,
            COMPUTE_COMMAND_ENCODER,
            COMMIT,
            WAIT_UNTIL_COMPLETED,
            STATUS,
            ERROR,
            SET_BUFFER,
            DISPATCH_THREADGROUPS,
            USE_RESOURCES,
            EXECUTE_COMMANDS_IN_BUFFER,
            END_ENCODING);

    private MetalMethods() {}
}
