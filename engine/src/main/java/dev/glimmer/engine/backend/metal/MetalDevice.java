package dev.glimmer.engine.backend.metal;

import static dev.glimmer.engine.backend.metal.MetalException.Step.*;
import static dev.glimmer.engine.backend.metal.MetalMethods.*;

import dev.glimmer.kernels.KernelLibrary;
import dev.glimmer.kernels.KernelSignature;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The system's Metal device with a command queue and a compute pipeline for every kernel,
 * compiled from the kernel sources at start-up. Shared by all pools of a process; owns every
 * Objective-C object it creates and releases them on close, and on every failure while opening.
 *
 * <p>Devices below the Apple7 GPU family (A14/M1) are refused: the kernels need SIMD-group
 * reductions, and the paravirtual device of macOS virtual machines reports Apple5. The library is
 * compiled with fast math off: the kernels start maxima and mark unused entries with
 * {@code -INFINITY}, which fast math lets the compiler assume never occurs; the CPU emulator and the
 * CUDA backend (no fast math either) then compute what Metal computes.
 */
public final class MetalDevice implements AutoCloseable {

    /** {@code MTLGPUFamilyApple1} is 1001, and so on. */
    private static final long GPU_FAMILY_APPLE = 1000;
    /** The newest Apple family probed for (Apple10: M5); newer devices also report it. */
    private static final int NEWEST_APPLE_FAMILY = 10;
    /** The oldest family with the SIMD-group reductions ({@code simd_sum}, {@code simd_max}) the kernels use: M1. */
    static final int OLDEST_APPLE_FAMILY = 7;
    /** From Apple9 (M3) on, no empty-dispatch workaround is needed before an indirect command buffer. */
    private static final int NO_WORKAROUND_APPLE_FAMILY = 9;
    /** {@code MTLResourceStorageModeShared}: CPU and GPU see the same memory. */
    private static final long STORAGE_SHARED = 0;

    private final ObjcRuntime rt;
    private final MemorySegment device;
    private final MemorySegment queue;
    private final String name;
    private final int appleFamily;
    private final boolean apiValidation;
    private final StepEncoder.Mode mode;
    private final long maxThreadgroupMemory;
    private final long recommendedMaxWorkingSetSize;
    private final Map<String, Pipeline> pipelines = new LinkedHashMap<>();
    private final List<MemorySegment> owned = new ArrayList<>();

    /** Reads the device's facts and refuses it when the kernels cannot run on it; makes the queue last. */
    private MetalDevice(ObjcRuntime rt, MemorySegment device, boolean apiValidation) {
        this.rt = rt;
        this.device = device;
        this.apiValidation = apiValidation;
        this.name = rt.string(rt.sendForObject(NAME, device));
        this.appleFamily = appleFamily(rt, device);
        if (appleFamily < OLDEST_APPLE_FAMILY) {
            throw new MetalException(
                    DEVICE,
                    name + " is " + (appleFamily == 0 ? "of no Apple GPU family" : "of GPU family Apple" + appleFamily)
                            + "; the kernels need Apple" + OLDEST_APPLE_FAMILY
                            + " (M1) or later for their SIMD-group reductions"
                            + (isVirtual(name)
                                    ? " (a macOS virtual machine's paravirtual GPU lacks them: run Glimmer on the Mac itself)"
                                    : ""));
        }
        // M1/M2 need the empty-grid warm-up before an indirect command buffer, which Metal's API validation rejects,
        // and their drivers crash without it: with validation on they encode directly (slower, but what is validated
        // is the same command list).
        boolean needsWarmUp = appleFamily < NO_WORKAROUND_APPLE_FAMILY;
        this.mode = isVirtual(name) || (needsWarmUp && apiValidation)
                ? StepEncoder.Mode.DIRECT
                : needsWarmUp ? StepEncoder.Mode.INDIRECT_WITH_EMPTY_DISPATCHES : StepEncoder.Mode.INDIRECT;
        this.maxThreadgroupMemory = (long) rt.send(MAX_THREADGROUP_MEMORY_LENGTH, device);
        this.recommendedMaxWorkingSetSize = (long) rt.send(RECOMMENDED_MAX_WORKING_SET_SIZE, device);
        MemorySegment q = rt.sendForObject(NEW_COMMAND_QUEUE, device);
        if (q.equals(MemorySegment.NULL)) {
            throw new MetalException(DEVICE, name + " gave no command queue");
        }
        this.queue = own(q);
    }

    /** Virtual devices (macOS VMs) misbehave with indirect command buffers: they get direct encoding. */
    private static boolean isVirtual(String name) {
        return name.toLowerCase(Locale.ROOT).contains("virtual");
    }

    /** The newest Apple GPU family the device supports, 0 for none. */
    private static int appleFamily(ObjcRuntime rt, MemorySegment device) {
        for (int family = NEWEST_APPLE_FAMILY; family >= 1; family--) {
            if ((boolean) rt.send(SUPPORTS_FAMILY, device, GPU_FAMILY_APPLE + family)) {
                return family;
            }
        }
        return 0;
    }

    /**
     * The system's default device with the project's kernels compiled.
     *
     * @throws MetalException when the libraries do not load, there is no usable device, or a kernel does
     *                        not compile (with Metal's message), naming the step that failed
     */
    public static MetalDevice open() {
        return open(ObjcRuntime.load(), apiValidation(System.getenv()));
    }

    /** Whether Metal's API validation is on ({@code MTL_DEBUG_LAYER=1}, as Xcode sets it). */
    static boolean apiValidation(Map<String, String> environment) {
        String layer = environment.get("MTL_DEBUG_LAYER");
        return layer != null && !layer.isEmpty() && !layer.equals("0");
    }

    static MetalDevice open(ObjcRuntime rt, boolean apiValidation) {
        try (ObjcRuntime.AutoreleasePool pool = rt.autoreleasePool()) {
            MemorySegment device = MetalException.during(DEVICE, rt::createSystemDefaultDevice);
            if (device.equals(MemorySegment.NULL)) {
                throw new MetalException(DEVICE, "MTLCreateSystemDefaultDevice found no Metal device");
            }
            MetalDevice d;
            try {
                d = MetalException.during(DEVICE, () -> new MetalDevice(rt, device, apiValidation));
            } catch (RuntimeException e) {
                rt.release(device);
                throw e;
            }
            try {
                d.compile(KernelLibrary.load());
            } catch (RuntimeException e) {
                d.close();
                throw e;
            }
            return d;
        }
    }

    private void compile(KernelLibrary kernels) {
        MemorySegment library = MetalException.during(COMPILING, () -> library(kernels));
        own(library);
        MetalException.during(PIPELINES, () -> {
            for (KernelSignature k : kernels.kernels()) {
                pipelines.put(k.name(), pipeline(library, k.name()));
            }
            return null;
        });
    }

    private MemorySegment library(KernelLibrary kernels) {
        MemorySegment options = rt.sendForObject(NEW, rt.objcClass("MTLCompileOptions"));
        try (Arena a = Arena.ofConfined()) {
            // IEEE floats: the kernels rely on -INFINITY (see the class comment). Deprecated in macOS 15 for
            // mathMode, but honoured on every macOS, which mathMode is not.
            rt.send(SET_FAST_MATH_ENABLED, options, false);
            MemorySegment error = ObjcRuntime.outPointer(a);
            MemorySegment library = rt.sendForObject(
                    NEW_LIBRARY_WITH_SOURCE, device, rt.nsString(kernels.metalSource()), options, error);
            if (library.equals(MemorySegment.NULL)) {
                throw new MetalException(
                        COMPILING,
                        CompileErrors.describe(
                                kernels, rt.errorMessage(error.get(ValueLayout.ADDRESS, 0), "no message from Metal")));
            }
            return library;
        } finally {
            rt.release(options);
        }
    }

    private Pipeline pipeline(MemorySegment library, String kernel) {
        MemorySegment function = rt.sendForObject(NEW_FUNCTION_WITH_NAME, library, rt.nsString(kernel));
        if (function.equals(MemorySegment.NULL)) {
            throw new MetalException(PIPELINES, "kernel " + kernel + " is missing from the compiled library");
        }
        MemorySegment descriptor = rt.sendForObject(NEW, rt.objcClass("MTLComputePipelineDescriptor"));
        try (Arena a = Arena.ofConfined()) {
            rt.send(SET_COMPUTE_FUNCTION, descriptor, function);
            if (mode != StepEncoder.Mode.DIRECT) {
                rt.send(SET_SUPPORT_ICB, descriptor, true);
            }
            MemorySegment error = ObjcRuntime.outPointer(a);
            MemorySegment state =
                    rt.sendForObject(NEW_PIPELINE_WITH_DESCRIPTOR, device, descriptor, 0L, MemorySegment.NULL, error);
            if (state.equals(MemorySegment.NULL)) {
                throw new MetalException(
                        PIPELINES,
                        "kernel " + kernel + ": "
                                + rt.errorMessage(
                                        error.get(ValueLayout.ADDRESS, 0),
                                        "Metal made no pipeline and gave no message"));
            }
            own(state);
            return new Pipeline(state, (long) rt.send(MAX_TOTAL_THREADS_PER_THREADGROUP, state), (long)
                    rt.send(STATIC_THREADGROUP_MEMORY_LENGTH, state));
        } finally {
            rt.release(descriptor);
            rt.release(function);
        }
    }

    ObjcRuntime runtime() {
        return rt;
    }

    MemorySegment queue() {
        return queue;
    }

    /** The device's name, e.g. {@code Apple M2 Pro}. */
    public String name() {
        return name;
    }

    /** How steps reach this device: an indirect command buffer (with the M1/M2 workaround), or direct encoding. */
    public StepEncoder.Mode mode() {
        return mode;
    }

    /** The newest Apple GPU family the device supports (7 for M1, 8 for M2, 9 for M3 and M4). */
    public int appleFamily() {
        return appleFamily;
    }

    /** E.g. {@code Apple M2 Pro (Apple8, INDIRECT_WITH_EMPTY_DISPATCHES)}: what a report needs to know. */
    public String describe() {
        return name + " (Apple" + appleFamily + ", " + mode + (apiValidation ? ", API validation on" : "") + ")";
    }

    /**
     * The device's {@code recommendedMaxWorkingSetSize}: the memory a process's resources may take before the GPU
     * slows or its command buffers fail (about two thirds of RAM on Macs of up to 32 GB).
     */
    public long recommendedMaxWorkingSetSize() {
        return recommendedMaxWorkingSetSize;
    }

    /** The pipeline of each kernel. */
    Map<String, Pipeline> pipelines() {
        return pipelines;
    }

    /** The device's {@code maxThreadgroupMemoryLength}: a dispatch's threadgroup memory, static included, must fit. */
    long maxThreadgroupMemory() {
        return maxThreadgroupMemory;
    }

    MetalCalls calls() {
        return new ObjcMetalCalls(rt, device);
    }

    /** A new zeroed shared-storage buffer (owned by the caller). */
    MemorySegment newSharedBuffer(long bytes) {
        MemorySegment b = rt.sendForObject(NEW_BUFFER_WITH_LENGTH, device, Math.max(16, bytes), STORAGE_SHARED);
        if (b.equals(MemorySegment.NULL)) {
            throw new MetalException(BUFFERS, "Metal could not allocate a buffer of " + bytes + " bytes");
        }
        return b;
    }

    /**
     * A buffer over {@code bytes} of mapped memory at {@code address}, without copying (owned by the
     * caller; the memory must outlive it). The range is widened to whole pages, which the mapping holds.
     */
    MemorySegment wrap(long address, long bytes) {
        long page = rt.pageSize();
        if (address % page != 0) {
            throw new MetalException(
                    BUFFERS, "weight range at 0x" + Long.toHexString(address) + " is not page aligned");
        }
        long length = (bytes + page - 1) / page * page;
        long max = (long) rt.send(MAX_BUFFER_LENGTH, device);
        if (length > max) {
            throw new MetalException(
                    BUFFERS, "a weight range of " + length + " bytes exceeds the device's buffer limit of " + max);
        }
        MemorySegment b = rt.sendForObject(
                NEW_BUFFER_NO_COPY,
                device,
                MemorySegment.ofAddress(address),
                length,
                STORAGE_SHARED,
                MemorySegment.NULL);
        if (b.equals(MemorySegment.NULL)) {
            throw new MetalException(
                    BUFFERS,
                    "Metal could not wrap " + length + " bytes of the model file at 0x" + Long.toHexString(address));
        }
        return b;
    }

    /**
     * Keeps {@code allocations} resident between steps with a residency set attached to the queue
     * (macOS 15 and later; owned by the caller, ended with {@link #endResidency}); NULL where the
     * device has no residency sets, and the per-step {@code useResources} declaration is all there is.
     */
    MemorySegment keepResident(List<MemorySegment> allocations) {
        if (!(boolean) rt.send(RESPONDS_TO_SELECTOR, device, rt.selector(NEW_RESIDENCY_SET.selector()))) {
            return MemorySegment.NULL;
        }
        MemorySegment descriptor = rt.sendForObject(NEW, rt.objcClass("MTLResidencySetDescriptor"));
        MemorySegment set;
        try (Arena a = Arena.ofConfined()) {
            rt.send(SET_INITIAL_CAPACITY, descriptor, (long) allocations.size());
            MemorySegment error = ObjcRuntime.outPointer(a);
            set = rt.sendForObject(NEW_RESIDENCY_SET, device, descriptor, error);
            if (set.equals(MemorySegment.NULL)) {
                throw new MetalException(
                        BUFFERS,
                        "Metal made no residency set: "
                                + rt.errorMessage(error.get(ValueLayout.ADDRESS, 0), "no message from Metal"));
            }
        } finally {
            rt.release(descriptor);
        }
        try {
            for (MemorySegment allocation : allocations) {
                rt.send(ADD_ALLOCATION, set, allocation);
            }
            rt.send(COMMIT, set);
            rt.send(REQUEST_RESIDENCY, set);
            rt.send(ADD_RESIDENCY_SET, queue, set);
        } catch (RuntimeException e) {
            rt.release(set);
            throw e;
        }
        return set;
    }

    /** Detaches and releases a set from {@link #keepResident} (NULL is ignored). */
    void endResidency(MemorySegment set) {
        if (!set.equals(MemorySegment.NULL)) {
            rt.send(REMOVE_RESIDENCY_SET, queue, set);
            rt.send(END_RESIDENCY, set);
            rt.release(set);
        }
    }

    /** The CPU view of a shared buffer's {@code bytes}. */
    MemorySegment contents(MemorySegment buffer, long bytes) {
        return rt.sendForObject(CONTENTS, buffer).reinterpret(bytes);
    }

    private MemorySegment own(MemorySegment object) {
        owned.add(object);
        return object;
    }

    @Override
    public void close() {
        for (int i = owned.size() - 1; i >= 0; i--) {
            rt.release(owned.get(i));
        }
        owned.clear();
        rt.release(device);
    }
}
