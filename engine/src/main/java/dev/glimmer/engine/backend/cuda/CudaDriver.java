package dev.glimmer.engine.backend.cuda;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.Optional;

/**
 * FFM bindings to the CUDA driver API ({@code libcuda.so.1}): the calls Glimmer needs, each
 * checked; a failing call throws {@link CudaException} with the driver's own error text. Handles
 * (contexts, modules, functions, streams, graphs, events) are raw addresses; device memory is a
 * {@code long} device address.
 */
public final class CudaDriver {

    /** {@code CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT}. */
    public static final int ATTRIBUTE_MULTIPROCESSORS = 16;
    /** {@code CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR} and {@code _MINOR}. */
    public static final int ATTRIBUTE_CC_MAJOR = 75;

    public static final int ATTRIBUTE_CC_MINOR = 76;
    /** {@code CU_STREAM_CAPTURE_MODE_RELAXED}. */
    private static final int CAPTURE_RELAXED = 2;

    private static final int NO_SUCH_DEVICE = 100;

    private static final Linker LINKER = Linker.nativeLinker();
    private static volatile Optional<CudaDriver> instance;

    private final SymbolLookup lib;
    private final MethodHandle cuInit,
            cuDriverGetVersion,
            cuDeviceGetCount,
            cuDeviceGet,
            cuDeviceGetName,
            cuDeviceGetAttribute,
            cuDeviceTotalMem,
            cuDevicePrimaryCtxRetain,
            cuCtxSetCurrent,
            cuCtxSynchronize,
            cuModuleLoadData,
            cuModuleGetFunction,
            cuMemAlloc,
            cuMemFree,
            cuMemcpyHtoD,
            cuMemcpyDtoH,
            cuMemcpyHtoDAsync,
            cuMemcpyDtoHAsync,
            cuMemcpyDtoDAsync,
            cuMemAllocHost,
            cuMemFreeHost,
            cuMemsetD8,
            cuMemGetInfo,
            cuStreamCreate,
            cuStreamSynchronize,
            cuLaunchKernel,
            cuStreamBeginCapture,
            cuStreamEndCapture,
            cuGraphInstantiateWithFlags,
            cuGraphLaunch,
            cuEventCreate,
            cuEventRecord,
            cuEventSynchronize,
            cuEventElapsedTime,
            cuEventDestroy,
            cuStreamDestroy,
            cuGraphExecDestroy,
            cuGetErrorString;

    private CudaDriver(SymbolLookup lib) {
        this.lib = lib;
        cuInit = fn("cuInit", JAVA_INT);
        cuDriverGetVersion = fn("cuDriverGetVersion", ADDRESS);
        cuDeviceGetCount = fn("cuDeviceGetCount", ADDRESS);
        cuDeviceGet = fn("cuDeviceGet", ADDRESS, JAVA_INT);
        cuDeviceGetName = fn("cuDeviceGetName", ADDRESS, JAVA_INT, JAVA_INT);
        cuDeviceGetAttribute = fn("cuDeviceGetAttribute", ADDRESS, JAVA_INT, JAVA_INT);
        cuDeviceTotalMem = fn("cuDeviceTotalMem_v2", ADDRESS, JAVA_INT);
        cuDevicePrimaryCtxRetain = fn("cuDevicePrimaryCtxRetain", ADDRESS, JAVA_INT);
        cuCtxSetCurrent = fn("cuCtxSetCurrent", ADDRESS);
        cuCtxSynchronize = fn("cuCtxSynchronize");
        cuModuleLoadData = fn("cuModuleLoadData", ADDRESS, ADDRESS);
        cuModuleGetFunction = fn("cuModuleGetFunction", ADDRESS, ADDRESS, ADDRESS);
        cuMemAlloc = fn("cuMemAlloc_v2", ADDRESS, JAVA_LONG);
        cuMemFree = fn("cuMemFree_v2", JAVA_LONG);
        cuMemcpyHtoD = fn("cuMemcpyHtoD_v2", JAVA_LONG, ADDRESS, JAVA_LONG);
        cuMemcpyDtoH = fn("cuMemcpyDtoH_v2", ADDRESS, JAVA_LONG, JAVA_LONG);
        cuMemcpyHtoDAsync = fn("cuMemcpyHtoDAsync_v2", JAVA_LONG, ADDRESS, JAVA_LONG, ADDRESS);
        cuMemcpyDtoHAsync = fn("cuMemcpyDtoHAsync_v2", ADDRESS, JAVA_LONG, JAVA_LONG, ADDRESS);
        cuMemcpyDtoDAsync = fn("cuMemcpyDtoDAsync_v2", JAVA_LONG, JAVA_LONG, JAVA_LONG, ADDRESS);
        cuMemAllocHost = fn("cuMemAllocHost_v2", ADDRESS, JAVA_LONG);
        cuMemFreeHost = fn("cuMemFreeHost", ADDRESS);
        cuMemsetD8 = fn("cuMemsetD8_v2", JAVA_LONG, JAVA_BYTE, JAVA_LONG);
        cuMemGetInfo = fn("cuMemGetInfo_v2", ADDRESS, ADDRESS);
        cuStreamCreate = fn("cuStreamCreate", ADDRESS, JAVA_INT);
        cuStreamSynchronize = fn("cuStreamSynchronize", ADDRESS);
        cuLaunchKernel = fn(
                "cuLaunchKernel",
                ADDRESS,
                JAVA_INT,
                JAVA_INT,
                JAVA_INT,
                JAVA_INT,
                JAVA_INT,
                JAVA_INT,
                JAVA_INT,
                ADDRESS,
                ADDRESS,
                ADDRESS);
        cuStreamBeginCapture = fn("cuStreamBeginCapture_v2", ADDRESS, JAVA_INT);
        cuStreamEndCapture = fn("cuStreamEndCapture", ADDRESS, ADDRESS);
        cuGraphInstantiateWithFlags = fn("cuGraphInstantiateWithFlags", ADDRESS, ADDRESS, JAVA_LONG);
        cuGraphLaunch = fn("cuGraphLaunch", ADDRESS, ADDRESS);
        cuEventCreate = fn("cuEventCreate", ADDRESS, JAVA_INT);
        cuEventRecord = fn("cuEventRecord", ADDRESS, ADDRESS);
        cuEventSynchronize = fn("cuEventSynchronize", ADDRESS);
        cuEventElapsedTime = lib.find("cuEventElapsedTime_v2").isPresent()
                ? fn("cuEventElapsedTime_v2", ADDRESS, ADDRESS, ADDRESS)
                : fn("cuEventElapsedTime", ADDRESS, ADDRESS, ADDRESS);
        cuEventDestroy = fn("cuEventDestroy_v2", ADDRESS);
        cuStreamDestroy = fn("cuStreamDestroy_v2", ADDRESS);
        cuGraphExecDestroy = fn("cuGraphExecDestroy", ADDRESS);
        cuGetErrorString = fn("cuGetErrorString", JAVA_INT, ADDRESS);
    }

    /** The driver, initialized, when {@code libcuda.so.1} can be loaded; empty on machines without one. */
    public static Optional<CudaDriver> load() {
        if (instance == null) {
            synchronized (CudaDriver.class) {
                if (instance == null) {
                    instance = open();
                }
            }
        }
        return instance;
    }

    private static Optional<CudaDriver> open() {
        SymbolLookup lib;
        try {
            lib = SymbolLookup.libraryLookup("libcuda.so.1", Arena.global());
        } catch (IllegalArgumentException e) {
            return Optional.empty();
        }
        CudaDriver d = new CudaDriver(lib);
        d.check("cuInit", d.call(d.cuInit, 0));
        return Optional.of(d);
    }

    private MethodHandle fn(String name, MemoryLayout... args) {
        MemorySegment symbol = lib.find(name)
                .orElseThrow(() -> new CudaException("libcuda.so.1 has no " + name + " (driver too old?)"));
        return LINKER.downcallHandle(symbol, FunctionDescriptor.of(JAVA_INT, args));
    }

    private int call(MethodHandle h, Object... args) {
        try {
            return (int) h.invokeWithArguments(args);
        } catch (RuntimeException e) {
            throw e;
        } catch (Throwable e) {
            throw new CudaException("CUDA driver call failed: " + e);
        }
    }

    private void check(String what, int result) {
        if (result != 0) {
            throw new CudaException(what + " failed: " + errorString(result) + " (CUresult " + result + ")");
        }
    }

    private String errorString(int result) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment p = a.allocate(ADDRESS);
            if (call(cuGetErrorString, result, p) != 0) {
                return "unknown error";
            }
            MemorySegment s = p.get(ADDRESS, 0);
            return s.equals(MemorySegment.NULL)
                    ? "unknown error"
                    : s.reinterpret(1024).getString(0);
        }
    }

    // ---- devices and contexts ----

    /** Devices the driver sees (0 when the driver finds none). */
    public int deviceCount() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment n = a.allocate(JAVA_INT);
            int r = call(cuDeviceGetCount, n);
            if (r == NO_SUCH_DEVICE) {
                return 0;
            }
            check("cuDeviceGetCount", r);
            return n.get(JAVA_INT, 0);
        }
    }

    // Each query below is one driver call with an out parameter in its own arena; they differ in the call and
    // the out type.
    public int device(int ordinal) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment d = a.allocate(JAVA_INT);
            check("cuDeviceGet", call(cuDeviceGet, d, ordinal));
            return d.get(JAVA_INT, 0);
        }
    }

    public String deviceName(int device) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment s = a.allocate(256);
            check("cuDeviceGetName", call(cuDeviceGetName, s, 256, device));
            return s.getString(0);
        }
    }

    public int attribute(int device, int attribute) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(JAVA_INT);
            check("cuDeviceGetAttribute", call(cuDeviceGetAttribute, v, attribute, device));
            return v.get(JAVA_INT, 0);
        }
    }

    public long totalMemory(int device) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(JAVA_LONG);
            check("cuDeviceTotalMem", call(cuDeviceTotalMem, v, device));
            return v.get(JAVA_LONG, 0);
        }
    }

    public int driverVersion() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(JAVA_INT);
            check("cuDriverGetVersion", call(cuDriverGetVersion, v));
            return v.get(JAVA_INT, 0);
        }
    }

    /** Makes the device's primary context current on the calling thread (retained once per call). */
    public MemorySegment usePrimaryContext(int device) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment c = a.allocate(ADDRESS);
            check("cuDevicePrimaryCtxRetain", call(cuDevicePrimaryCtxRetain, c, device));
            MemorySegment ctx = c.get(ADDRESS, 0);
            check("cuCtxSetCurrent", call(cuCtxSetCurrent, ctx));
            return ctx;
        }
    }

    public void setCurrent(MemorySegment context) {
        check("cuCtxSetCurrent", call(cuCtxSetCurrent, context));
    }

    public void synchronize() {
        check("cuCtxSynchronize", call(cuCtxSynchronize));
    }

    /** Free and total bytes of the current context's device. */
    public long[] memoryInfo() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment free = a.allocate(JAVA_LONG);
            MemorySegment total = a.allocate(JAVA_LONG);
            check("cuMemGetInfo", call(cuMemGetInfo, free, total));
            return new long[] {free.get(JAVA_LONG, 0), total.get(JAVA_LONG, 0)};
        }
    }

    // ---- modules ----

    public MemorySegment loadModule(byte[] image) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment m = a.allocate(ADDRESS);
            check("cuModuleLoadData", call(cuModuleLoadData, m, a.allocateFrom(JAVA_BYTE, image)));
            return m.get(ADDRESS, 0);
        }
    }

    public MemorySegment function(MemorySegment module, String name) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment f = a.allocate(ADDRESS);
            check("cuModuleGetFunction(" + name + ")", call(cuModuleGetFunction, f, module, a.allocateFrom(name)));
            return f.get(ADDRESS, 0);
        }
    }

    // ---- memory ----

    /** {@code bytes} of device memory (at least 1). */
    public long alloc(long bytes) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment p = a.allocate(JAVA_LONG);
            check("cuMemAlloc(" + bytes + " bytes)", call(cuMemAlloc, p, Math.max(1, bytes)));
            return p.get(JAVA_LONG, 0);
        }
    }

    public void free(long pointer) {
        check("cuMemFree", call(cuMemFree, pointer));
    }

    public void copyToDevice(long device, MemorySegment host, long bytes) {
        check("cuMemcpyHtoD", call(cuMemcpyHtoD, device, host, bytes));
    }

    public void copyToHost(MemorySegment host, long device, long bytes) {
        check("cuMemcpyDtoH", call(cuMemcpyDtoH, host, device, bytes));
    }

    /**
     * Ordered on {@code stream}. From {@link #allocHost pinned} memory the bytes are read when the copy runs (leave them
     * alone until then); from pageable memory the driver stages them, may wait for the stream to do so, and they may be
     * reused when the call returns.
     */
    public void copyToDeviceAsync(long device, MemorySegment host, long bytes, MemorySegment stream) {
        check("cuMemcpyHtoDAsync", call(cuMemcpyHtoDAsync, device, host, bytes, stream));
    }

    /**
     * Ordered on {@code stream}: done once the stream is synchronized. {@code host} should be
     * {@link #allocHost pinned}: from pageable memory the driver stages the copy and returns only when it is done.
     */
    public void copyToHostAsync(MemorySegment host, long device, long bytes, MemorySegment stream) {
        check("cuMemcpyDtoHAsync", call(cuMemcpyDtoHAsync, host, device, bytes, stream));
    }

    /** Device to device, ordered on {@code stream}. */
    public void copyDeviceAsync(long to, long from, long bytes, MemorySegment stream) {
        check("cuMemcpyDtoDAsync", call(cuMemcpyDtoDAsync, to, from, bytes, stream));
    }

    /**
     * {@code bytes} of page-locked host memory (at least 1), which the GPU copies to and from directly
     * (no staging through a driver buffer); free it with {@link #freeHost}.
     */
    public MemorySegment allocHost(long bytes) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment p = a.allocate(ADDRESS);
            check("cuMemAllocHost(" + bytes + " bytes)", call(cuMemAllocHost, p, Math.max(1, bytes)));
            return p.get(ADDRESS, 0).reinterpret(Math.max(1, bytes));
        }
    }

    public void freeHost(MemorySegment host) {
        check("cuMemFreeHost", call(cuMemFreeHost, host));
    }

    public void memset(long device, byte value, long bytes) {
        check("cuMemsetD8", call(cuMemsetD8, device, value, bytes));
    }

    // ---- streams, launches, graphs, events ----

    public MemorySegment newStream() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment s = a.allocate(ADDRESS);
            check("cuStreamCreate", call(cuStreamCreate, s, 1)); // CU_STREAM_NON_BLOCKING
            return s.get(ADDRESS, 0);
        }
    }

    public void synchronize(MemorySegment stream) {
        check("cuStreamSynchronize", call(cuStreamSynchronize, stream));
    }

    /** Launches {@code function}; {@code params} is the array of pointers to each argument's value. */
    public void launch(
            MemorySegment function,
            int gx,
            int gy,
            int gz,
            int bx,
            int by,
            int bz,
            int sharedBytes,
            MemorySegment stream,
            MemorySegment params,
            String what) {
        check(
                "cuLaunchKernel(" + what + ")",
                call(
                        cuLaunchKernel,
                        function,
                        gx,
                        gy,
                        gz,
                        bx,
                        by,
                        bz,
                        sharedBytes,
                        stream,
                        params,
                        MemorySegment.NULL));
    }

    public void beginCapture(MemorySegment stream) {
        check("cuStreamBeginCapture", call(cuStreamBeginCapture, stream, CAPTURE_RELAXED));
    }

    /** Ends the capture and instantiates the captured graph. */
    public MemorySegment endCaptureAndInstantiate(MemorySegment stream) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment g = a.allocate(ADDRESS);
            check("cuStreamEndCapture", call(cuStreamEndCapture, stream, g));
            MemorySegment exec = a.allocate(ADDRESS);
            check("cuGraphInstantiate", call(cuGraphInstantiateWithFlags, exec, g.get(ADDRESS, 0), 0L));
            return exec.get(ADDRESS, 0);
        }
    }

    public void launchGraph(MemorySegment graphExec, MemorySegment stream) {
        check("cuGraphLaunch", call(cuGraphLaunch, graphExec, stream));
    }

    public MemorySegment newEvent() {
        return newEvent(true);
    }

    /** An event that can time ({@link #elapsedMillis}), or only be waited for (CU_EVENT_DISABLE_TIMING: cheaper). */
    public MemorySegment newEvent(boolean timing) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment e = a.allocate(ADDRESS);
            check("cuEventCreate", call(cuEventCreate, e, timing ? 0 : 2));
            return e.get(ADDRESS, 0);
        }
    }

    /** Waits until the work queued before {@code event}'s last record is done. */
    public void synchronizeEvent(MemorySegment event) {
        check("cuEventSynchronize", call(cuEventSynchronize, event));
    }

    public void record(MemorySegment event, MemorySegment stream) {
        check("cuEventRecord", call(cuEventRecord, event, stream));
    }

    /** Milliseconds between two recorded events (waits for the second). */
    public float elapsedMillis(MemorySegment start, MemorySegment end) {
        check("cuEventSynchronize", call(cuEventSynchronize, end));
        try (Arena a = Arena.ofConfined()) {
            MemorySegment ms = a.allocate(JAVA_FLOAT);
            check("cuEventElapsedTime", call(cuEventElapsedTime, ms, start, end));
            return ms.get(JAVA_FLOAT, 0);
        }
    }

    public void destroyEvent(MemorySegment event) {
        check("cuEventDestroy", call(cuEventDestroy, event));
    }

    public void destroyStream(MemorySegment stream) {
        check("cuStreamDestroy", call(cuStreamDestroy, stream));
    }

    public void destroyGraph(MemorySegment graphExec) {
        check("cuGraphExecDestroy", call(cuGraphExecDestroy, graphExec));
    }
}
