package dev.glimmer.engine.backend.cuda;

import java.lang.foreign.MemorySegment;
import java.util.Optional;

/**
 * One CUDA device with its primary context. CUDA binds a context to a thread, so every entry point
 * that may run on a new thread calls {@link #makeCurrent()} first.
 *
 * @param driver       the driver bindings
 * @param ordinal      the device number
 * @param name         e.g. "NVIDIA H200"
 * @param major        compute capability
 * @param minor
 * @param multiprocessors SMs
 * @param totalMemory  bytes
 * @param context      its primary context
 */
public record CudaDevice(
        CudaDriver driver,
        int ordinal,
        String name,
        int major,
        int minor,
        int multiprocessors,
        long totalMemory,
        MemorySegment context) {

    /** Whether a device is usable and, if not, why. */
    public record Probe(Optional<CudaDevice> device, String reason) {}

    private static volatile Probe probe;

    /** Looks for a device once per JVM; never throws. */
    public static Probe probe() {
        if (probe == null) {
            synchronized (CudaDevice.class) {
                if (probe == null) {
                    probe = find();
                }
            }
        }
        return probe;
    }

    private static Probe find() {
        try {
            Optional<CudaDriver> d = CudaDriver.load();
            if (d.isEmpty()) {
                return new Probe(Optional.empty(), "no CUDA driver (libcuda.so.1) on this machine");
            }
            CudaDriver driver = d.get();
            if (driver.deviceCount() == 0) {
                return new Probe(Optional.empty(), "the CUDA driver sees no device");
            }
            int dev = driver.device(0);
            MemorySegment ctx = driver.usePrimaryContext(dev);
            return new Probe(
                    Optional.of(new CudaDevice(
                            driver,
                            dev,
                            driver.deviceName(dev),
                            driver.attribute(dev, CudaDriver.ATTRIBUTE_CC_MAJOR),
                            driver.attribute(dev, CudaDriver.ATTRIBUTE_CC_MINOR),
                            driver.attribute(dev, CudaDriver.ATTRIBUTE_MULTIPROCESSORS),
                            driver.totalMemory(dev),
                            ctx)),
                    "");
        } catch (CudaException e) {
            return new Probe(Optional.empty(), e.getMessage());
        }
    }

    public void makeCurrent() {
        driver.setCurrent(context);
    }

    /** NVRTC's architecture option for this device, e.g. {@code --gpu-architecture=sm_90}. */
    public String architecture() {
        return "--gpu-architecture=sm_" + major + minor;
    }

    /** Bytes of device memory free now (for every process), from the driver's free/total. */
    public long memoryFree() {
        makeCurrent();
        return driver.memoryInfo()[0];
    }

    /** Bytes of device memory in use (by every process), from the driver's free/total. */
    public long memoryUsed() {
        makeCurrent();
        long[] info = driver.memoryInfo();
        return info[1] - info[0];
    }
}
