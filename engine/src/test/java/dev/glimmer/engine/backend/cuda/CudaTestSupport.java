package dev.glimmer.engine.backend.cuda;

import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.commandlist.CommandListPool;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.KernelLibrary;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Assumptions;

/**
 * The device for the GPU tests: they run where a CUDA device is present and are reported as
 * skipped, with the reason, everywhere else (CI has no GPU).
 */
final class CudaTestSupport {

    private static CudaKernels kernels;

    private CudaTestSupport() {}

    /** The kernels on the first device; skips the calling test when there is no device. */
    static synchronized CudaKernels kernels() {
        CudaDevice.Probe probe = CudaDevice.probe();
        Assumptions.assumeTrue(probe.device().isPresent(), "GPU test skipped: " + probe.reason());
        if (kernels == null) {
            kernels = CudaKernels.load(probe.device().get(), KernelLibrary.load(), Path.of("target", "cuda-cache"));
        }
        kernels.device().makeCurrent();
        return kernels;
    }

    /** A pool of {@code slots} sequences of {@code capacity} positions over {@code weights}, as the server makes them. */
    static CommandListPool pool(CudaWeights weights, int slots, int capacity) {
        return new CommandListPool(
                weights.model(), new CudaGraphRunner(weights, false), slots, capacity, Geometry.PROMPT_TOKENS);
    }

    /** One decode step of {@code sequence} alone, its logits and greedy token read back. */
    static SequencePool.Next step(SequencePool pool, SequencePool.Sequence sequence, int token) {
        return pool.step(
                        List.of(sequence), new int[] {token}, new SequencePool.Readout[] {SequencePool.Readout.LOGITS})[
                0];
    }

    /** Device memory holding {@code data}. */
    static long upload(CudaDriver driver, MemorySegment data) {
        long p = driver.alloc(Math.max(16, data.byteSize()));
        driver.copyToDevice(p, data, data.byteSize());
        return p;
    }

    static long upload(CudaDriver driver, float[] v) {
        return upload(driver, nativeFloats(v));
    }

    private static MemorySegment nativeFloats(float[] v) {
        MemorySegment s = Arena.ofAuto().allocate(4L * Math.max(1, v.length), 16);
        MemorySegment.copy(v, 0, s, ValueLayout.JAVA_FLOAT, 0, v.length);
        return s;
    }

    static long uploadBytes(CudaDriver driver, byte[] b) {
        MemorySegment s = Arena.ofAuto().allocate(Math.max(16, b.length), 16);
        MemorySegment.copy(b, 0, s, ValueLayout.JAVA_BYTE, 0, b.length);
        return upload(driver, s);
    }

    static float[] download(CudaDriver driver, long p, int floats) {
        MemorySegment s = Arena.ofAuto().allocate(4L * floats, 16);
        driver.synchronize();
        driver.copyToHost(s, p, 4L * floats);
        return s.toArray(ValueLayout.JAVA_FLOAT);
    }
}
