package dev.glimmer.engine.backend.choice;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.SequencePools;
import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.backend.cpu.CpuSequencePool;
import dev.glimmer.engine.backend.emulated.EmulatorRunner;
import dev.glimmer.engine.backend.metal.MetalPlatform;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;
import java.util.Optional;

/**
 * Chooses the backend for {@code --backend auto|cpu|metal|cuda|emulated}. {@code auto} takes Metal on macOS
 * on Apple Silicon, else CUDA where an NVIDIA device is present, when the model's shape fits the
 * GPU decode step and the self-test passes; otherwise the CPU, saying why. A failed GPU self-test
 * always falls back to the CPU: wrong tokens are worse than slow ones. The Metal classes are
 * touched only on macOS. The only package that knows the backends' implementations.
 */
public final class Backends {

    private Backends() {}

    /**
     * How the CPU computes where it is chosen: its worker threads, its KV cache type, the rows one forward pass
     * computes together at most (tokens of a prompt, or sequences of a decode step; more run in turns); and, for every
     * backend's pools, the tokens a speculative step drafts at most with the model's NextN block (0: the pools do not
     * draft; the GPU command lists draft at most {@code Geometry.MAX_DRAFTS}).
     */
    public record CpuOptions(int threads, KvCacheType cacheType, int promptBatch, int maxDrafts) {
        /** One thread per physical core, the default cache type, prompts in batches of {@link GlmForward#DEFAULT_BATCH}. */
        public static final CpuOptions DEFAULT =
                new CpuOptions(CpuBackend.defaultThreads(), KvCacheType.DEFAULT, GlmForward.DEFAULT_BATCH);

        /** Without drafting. */
        public CpuOptions(int threads, KvCacheType cacheType, int promptBatch) {
            this(threads, cacheType, promptBatch, 0);
        }
    }

    /** {@link #choose(BackendKind, GlmModel, boolean, CpuOptions)} with the self-test and the default CPU options. */
    public static BackendChoice choose(BackendKind requested, GlmModel model) {
        return choose(requested, model, true, CpuOptions.DEFAULT);
    }

    /** {@link #choose(BackendKind, GlmModel, boolean, CpuOptions)} with the self-test. */
    public static BackendChoice choose(BackendKind requested, GlmModel model, CpuOptions cpu) {
        return choose(requested, model, true, cpu);
    }

    /**
     * @param requested one of {@link BackendKind#CHOOSABLE}
     * @param selfTest  whether a GPU must pass the self-test first ({@code false}: trust it untested)
     * @param cpu       how the CPU computes, where it is chosen (also as a fallback)
     * @throws InvalidInputException for {@code metal}/{@code cuda} where this build cannot run them
     */
    public static BackendChoice choose(BackendKind requested, GlmModel model, boolean selfTest, CpuOptions cpu) {
        return switch (requested) {
            case CPU -> cpu(model, cpu, "asked for with --backend cpu");
            case CUDA -> CudaChoice.choose(model, selfTest, true, cpu, System.err);
            case METAL -> {
                if (!MetalPlatform.isMacArm64()) {
                    throw new InvalidInputException("--backend metal: " + metalUnavailable());
                }
                yield MetalChoice.choose(model, selfTest, cpu);
            }
            case AUTO ->
                MetalPlatform.isMacArm64()
                        ? MetalChoice.choose(model, selfTest, cpu)
                        : CudaChoice.choose(model, selfTest, false, cpu, System.err);
            case EMULATED ->
                new BackendChoice(
                        BackendKind.EMULATED,
                        "asked for with --backend emulated: the GPU command" + " lists on the CPU kernel emulator",
                        Optional.empty(),
                        EmulatorRunner.pools(model, cpu.maxDrafts()));
        };
    }

    /**
     * Runs the self-test of a GPU path: {@code metal}, {@code cuda}, {@code emulated} (the kernels on
     * the CPU emulator, which needs clang-19), or {@code auto}: Metal or CUDA where it can run, else
     * the emulator.
     *
     * @param backend one of {@link BackendKind#SELF_TEST}
     * @throws InvalidInputException for {@code metal} off macOS/arm64, or {@code cuda} without a device
     */
    public static SelfTest.Report selfTest(BackendKind backend) {
        return switch (backend) {
            case AUTO -> selfTest(selfTestTarget(backend));
            case CUDA -> CudaChoice.selfTest();
            case METAL -> {
                if (!MetalPlatform.isMacArm64()) {
                    throw new InvalidInputException("--backend metal: " + metalUnavailable());
                }
                yield MetalChoice.selfTest();
            }
            case EMULATED -> SelfTest.run("emulated", (model, capacity) -> EmulatorRunner.pool(model, 1, capacity));
            case CPU -> throw new IllegalArgumentException("the self-test checks a GPU path against the CPU");
        };
    }

    /** The GPU path {@link #selfTest} checks for {@code backend}: {@code auto} resolved to metal, cuda or emulated. */
    public static BackendKind selfTestTarget(BackendKind backend) {
        if (backend != BackendKind.AUTO) {
            return backend;
        }
        return MetalPlatform.isMacArm64()
                ? BackendKind.METAL
                : CudaChoice.available() ? BackendKind.CUDA : BackendKind.EMULATED;
    }

    /** Why Metal cannot run here. */
    public static String metalUnavailable() {
        return "Metal needs macOS on Apple Silicon, this is " + MetalPlatform.describe();
    }

    static BackendChoice cpu(GlmModel model, CpuOptions cpu, String reason) {
        return cpu(model, cpu, reason, Optional.empty());
    }

    static BackendChoice cpu(GlmModel model, CpuOptions cpu, String reason, Optional<SelfTest.Report> selfTest) {
        return new BackendChoice(BackendKind.CPU, reason, selfTest, new SequencePools() {
            @Override
            public SequencePool pool(int slots, int capacity) {
                return new CpuSequencePool(
                        model,
                        new CpuBackend(cpu.threads()),
                        slots,
                        capacity,
                        cpu.cacheType(),
                        cpu.promptBatch(),
                        cpu.maxDrafts());
            }

            @Override
            public long bytesPerSequence(int capacity) {
                return KvCache.bytes(
                        model.cacheLayers(cpu.maxDrafts() > 0), model.config().kvRowWidth(), capacity, cpu.cacheType());
            }
        });
    }
}
