package dev.glimmer.engine.backend.metal;

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

import static dev.glimmer.engine.backend.metal.MetalMethods.*;

/**
 * The system's Metal device with a command queue and a compute pipeline for every kernel,
 * compiled from the kernel sources at start-up with indirect-command-buffer support. Shared by
 * all decoders of a process; owns every Objective-C object it creates and releases them on close.
 */
public final class MetalDevice implements AutoCloseable {

    /** {@code MTLGPUFamilyApple9} (M3 and later): they need no empty-dispatch workaround. */
    private static final long GPU_FAMILY_APPLE9 = 1009;
    /** {@code MTLResourceStorageModeShared}: CPU and GPU see the same memory. */
    private static final long STORAGE_SHARED = 0;

    private final ObjcRuntime rt;
    private final MemorySegment device;
    private final MemorySegment queue;
    private final String name;
    private final StepEncoder.Mode mode;
    private final Map<String, MemorySegment> pipelines = new LinkedHashMap<>();
    private final List<MemorySegment> owned = new ArrayList<>();

    private MetalDevice(ObjcRuntime rt, MemorySegment device) {
        this.rt = rt;
        this.device = device;
        this.name = rt.string(rt.sendForObject(NAME, device));
        this.mode = name.toLowerCase(Locale.ROOT).contains("virtual") ? StepEncoder.Mode.DIRECT
                : (boolean) rt.send(SUPPORTS_FAMILY, device, GPU_FAMILY_APPLE9) ? StepEncoder.Mode.INDIRECT
                : StepEncoder.Mode.INDIRECT_WITH_EMPTY_DISPATCHES;
        this.queue = own(rt.sendForObject(NEW_COMMAND_QUEUE, device));
    }

    /**
     * The system's default device with the project's kernels compiled.
     *
     * @throws MetalException when there is no device or a kernel does not compile (with Metal's message)
     */
    public static MetalDevice open() {
        return open(ObjcRuntime.load());
    }

    static MetalDevice open(ObjcRuntime rt) {
        try (ObjcRuntime.AutoreleasePool pool = rt.autoreleasePool()) {
            MemorySegment device = rt.createSystemDefaultDevice();
            if (device.equals(MemorySegment.NULL)) {
                throw new MetalException("MTLCreateSystemDefaultDevice found no Metal device");
            }
            MetalDevice d = new MetalDevice(rt, device);
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
        MemorySegment library;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment error = ObjcRuntime.outPointer(a);
            library = rt.sendForObject(NEW_LIBRARY_WITH_SOURCE, device, rt.nsString(kernels.metalSource()),
                    MemorySegment.NULL, error);
            if (library.equals(MemorySegment.NULL)) {
                throw new MetalException("the kernels do not compile: " + CompileErrors.describe(kernels,
                        rt.errorMessage(error.get(ValueLayout.ADDRESS, 0), "no message from Metal")));
            }
        }
        own(library);
        for (KernelSignature k : kernels.kernels()) {
            pipelines.put(k.name(), pipeline(library, k.name()));
        }
    }

    private MemorySegment pipeline(MemorySegment library, String kernel) {
        MemorySegment function = rt.sendForObject(NEW_FUNCTION_WITH_NAME, library, rt.nsString(kernel));
        if (function.equals(MemorySegment.NULL)) {
            throw new MetalException("kernel " + kernel + " is missing from the compiled library");
        }
        MemorySegment descriptor = rt.sendForObject(NEW, rt.objcClass("MTLComputePipelineDescriptor"));
        try (Arena a = Arena.ofConfined()) {
            rt.send(SET_COMPUTE_FUNCTION, descriptor, function);
            rt.send(SET_SUPPORT_ICB, descriptor, true);
            MemorySegment error = ObjcRuntime.outPointer(a);
            MemorySegment pipeline = rt.sendForObject(NEW_PIPELINE_WITH_DESCRIPTOR, device, descriptor, 0L,
                    MemorySegment.NULL, error);
            if (pipeline.equals(MemorySegment.NULL)) {
                throw new MetalException("kernel " + kernel + ": "
                        + rt.errorMessage(error.get(ValueLayout.ADDRESS, 0), "Metal made no pipeline and gave no message"));
            }
            return own(pipeline);
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

    Map<String, MemorySegment> pipelines() {
        return pipelines;
    }

    MetalCalls calls() {
        return new ObjcMetalCalls(rt, device);
    }

    /** A new zeroed shared-storage buffer (owned by the caller). */
    MemorySegment newSharedBuffer(long bytes) {
        MemorySegment b = rt.sendForObject(NEW_BUFFER_WITH_LENGTH, device, Math.max(16, bytes), STORAGE_SHARED);
        if (b.equals(MemorySegment.NULL)) {
            throw new MetalException("Metal could not allocate a buffer of " + bytes + " bytes");
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
            throw new MetalException("weight range at 0x" + Long.toHexString(address) + " is not page aligned");
        }
        long length = (bytes + page - 1) / page * page;
        long max = (long) rt.send(MAX_BUFFER_LENGTH, device);
        if (length > max) {
            throw new MetalException("a weight range of " + length + " bytes exceeds the device's buffer limit of " + max);
        }
        MemorySegment b = rt.sendForObject(NEW_BUFFER_NO_COPY, device, MemorySegment.ofAddress(address), length,
                STORAGE_SHARED, MemorySegment.NULL);
        if (b.equals(MemorySegment.NULL)) {
            throw new MetalException("Metal could not wrap " + length + " bytes of the model file at 0x"
                    + Long.toHexString(address));
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
                throw new MetalException("Metal made no residency set: "
                        + rt.errorMessage(error.get(ValueLayout.ADDRESS, 0), "no message from Metal"));
            }
        } finally {
            rt.release(descriptor);
        }
        for (MemorySegment allocation : allocations) {
            rt.send(ADD_ALLOCATION, set, allocation);
        }
        rt.send(COMMIT, set);
        rt.send(REQUEST_RESIDENCY, set);
        rt.send(ADD_RESIDENCY_SET, queue, set);
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
