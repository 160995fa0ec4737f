package dev.glimmer.engine.backend.choice;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.SequencePools;
import dev.glimmer.engine.backend.commandlist.CommandListPool;
import dev.glimmer.engine.backend.commandlist.DecodeModels;
import dev.glimmer.engine.backend.cuda.CudaDevice;
import dev.glimmer.engine.backend.cuda.CudaGraphRunner;
import dev.glimmer.engine.backend.cuda.CudaKernels;
import dev.glimmer.engine.backend.cuda.CudaWeights;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.decode.DecodeCommandListBuilder;
import java.io.PrintStream;
import java.util.Locale;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * The CUDA half of {@link Backends}: finds the device, compiles (or takes from the cache) the
 * kernels, runs the self-test against the CPU, then copies the model's weights to the device once;
 * falls back to the CPU, saying why, when any of it fails.
 */
final class CudaChoice {

    private CudaChoice() {}

    /** Whether a CUDA device is usable here (never throws). */
    static boolean available() {
        return CudaDevice.probe().device().isPresent();
    }

    /** Why there is no CUDA device here. */
    static String unavailable() {
        return CudaDevice.probe().reason();
    }

    /** The self-test on the first CUDA device. */
    static SelfTest.Report selfTest() {
        CudaDevice device = CudaDevice.probe()
                .device()
                .orElseThrow(() -> new InvalidInputException("--backend cuda: " + unavailable()));
        return SelfTest.run("cuda on " + device.name(), CudaChoice::selfTestPool);
    }

    /** A pool of one sequence for one built-in self-test model: its own (tiny) weights on the device, freed with it. */
    private static CommandListPool selfTestPool(GlmModel model, int capacity) {
        CudaDevice device = CudaDevice.probe().device().orElseThrow();
        CudaWeights weights = new CudaWeights(model, CudaKernels.load(device), false, bytes -> {});
        CudaGraphRunner runner;
        try {
            runner = new CudaGraphRunner(weights, true);
        } catch (RuntimeException e) {
            weights.close();
            throw e;
        }
        return new CommandListPool(model, runner, 1, capacity, Geometry.PROMPT_TOKENS);
    }

    /**
     * @param explicit {@code --backend cuda} (no device is then an input error) rather than {@code auto}
     */
    static BackendChoice choose(
            GlmModel model, boolean selfTest, boolean explicit, Backends.CpuOptions cpu, PrintStream log) {
        Optional<CudaDevice> found = CudaDevice.probe().device();
        if (found.isEmpty()) {
            if (explicit) {
                throw new InvalidInputException("--backend cuda: " + unavailable());
            }
            return Backends.cpu(model, cpu, "auto: " + Backends.metalUnavailable() + "; CUDA: " + unavailable());
        }
        try {
            DecodeCommandListBuilder.build(DecodeModels.of(model.file(), model.config()), 1);
        } catch (RuntimeException e) {
            return Backends.cpu(model, cpu, "the GPU decode step cannot run this model: " + e.getMessage());
        }
        CudaDevice device = found.get();
        String what = "CUDA on " + device.name();
        Optional<SelfTest.Report> report = Optional.empty();
        try {
            CudaKernels.load(device);
            if (selfTest) {
                SelfTest.Report r = SelfTest.run("cuda", CudaChoice::selfTestPool);
                if (!r.passed()) {
                    return Backends.cpu(
                            model, cpu, what + " failed its self-test: " + r.firstFailure(), Optional.of(r));
                }
                report = Optional.of(r);
            }
        } catch (RuntimeException e) {
            return Backends.cpu(model, cpu, what + " failed its self-test: " + e.getMessage());
        }
        int drafts = CommandListPool.drafts(model, cpu.maxDrafts());
        long total = model.file().mapping().byteSize();
        long[] next = {0};
        long usedBefore = device.memoryUsed();
        CudaWeights weights;
        try {
            weights = new CudaWeights(model, CudaKernels.load(device), drafts > 0, bytes -> {
                if (bytes >= next[0]) {
                    log.printf(
                            Locale.ROOT,
                            "copying weights to %s: %.1f / %.1f GB%n",
                            device.name(),
                            bytes / 1e9,
                            total / 1e9);
                    next[0] += 4_000_000_000L;
                }
            });
        } catch (RuntimeException e) {
            return Backends.cpu(model, cpu, what + " could not take the weights: " + e.getMessage(), report);
        }
        return new BackendChoice(
                BackendKind.CUDA,
                what + (selfTest ? ", self-test passed" : ", self-test skipped"),
                report,
                new SequencePools() {
                    /** Sequences in one KV pool on the device, stepping together through the batch decode graphs. */
                    @Override
                    public SequencePool pool(int slots, int capacity) {
                        return new CommandListPool(
                                model,
                                new CudaGraphRunner(weights, false),
                                slots,
                                capacity,
                                Geometry.PROMPT_TOKENS,
                                drafts);
                    }

                    /** A slot of the KV pool (activations belong to the pool). */
                    @Override
                    public long bytesPerSequence(int capacity) {
                        return CommandListPool.bytesPerSequence(model, capacity, drafts > 0);
                    }

                    /** Free device memory, read after the weights' upload. */
                    @Override
                    public Optional<SequencePools.DeviceMemory> deviceMemory() {
                        return Optional.of(new SequencePools.DeviceMemory(
                                device.name() + "'s free memory", device.memoryFree(), true));
                    }

                    @Override
                    public OptionalLong gpuMemoryUsed() {
                        return OptionalLong.of(device.memoryUsed() - usedBefore);
                    }

                    @Override
                    public void close() {
                        weights.close();
                    }
                });
    }
}
