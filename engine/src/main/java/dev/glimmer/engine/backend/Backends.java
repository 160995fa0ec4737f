package dev.glimmer.engine.backend;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.backend.metal.MetalPlatform;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmModel;

import java.util.Optional;

/**
 * Chooses the backend for {@code --backend auto|cpu|metal|cuda}. {@code auto} takes Metal on macOS
 * on Apple Silicon, else CUDA where an NVIDIA device is present, when the model's shape fits the
 * GPU decode step and the self-test passes; otherwise the CPU, saying why. A failed GPU self-test
 * always falls back to the CPU: wrong tokens are worse than slow ones. The Metal classes are
 * touched only on macOS.
 */
public final class Backends {

    private Backends() {
    }

    /** {@link #choose(BackendKind, GlmModel, boolean)} with the self-test. */
    public static BackendChoice choose(BackendKind requested, GlmModel model) {
        return choose(requested, model, true);
    }

    /**
     * @param requested one of {@link BackendKind#SERVING}
     * @param selfTest  whether a GPU must pass the self-test first ({@code false}: trust it untested)
     * @throws InvalidInputException for {@code metal}/{@code cuda} where this build cannot run them
     */
    public static BackendChoice choose(BackendKind requested, GlmModel model, boolean selfTest) {
        return switch (requested) {
            case CPU -> cpu(model, "asked for with --backend cpu");
            case CUDA -> CudaChoice.choose(model, selfTest, true, System.err);
            case METAL -> {
                if (!MetalPlatform.isMacArm64()) {
                    throw new InvalidInputException("--backend metal: " + metalUnavailable());
                }
                yield MetalChoice.choose(model, selfTest);
            }
            case AUTO -> MetalPlatform.isMacArm64() ? MetalChoice.choose(model, selfTest)
                    : CudaChoice.choose(model, selfTest, false, System.err);
            case EMULATED -> throw new IllegalArgumentException("the emulated backend only runs the self-test");
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
            case EMULATED -> SelfTest.run("emulated", EmulatedTokenDecoder::new);
            case CPU -> throw new IllegalArgumentException("the self-test checks a GPU path against the CPU");
        };
    }

    /** The GPU path {@link #selfTest} checks for {@code backend}: {@code auto} resolved to metal, cuda or emulated. */
    public static BackendKind selfTestTarget(BackendKind backend) {
        if (backend != BackendKind.AUTO) {
            return backend;
        }
        return MetalPlatform.isMacArm64() ? BackendKind.METAL
                : CudaChoice.available() ? BackendKind.CUDA : BackendKind.EMULATED;
    }

    /** Why Metal cannot run here. */
    public static String metalUnavailable() {
        return "Metal needs macOS on Apple Silicon, this is " + MetalPlatform.describe();
    }

    static BackendChoice cpu(GlmModel model, String reason) {
        return cpu(model, reason, Optional.empty());
    }

    static BackendChoice cpu(GlmModel model, String reason, Optional<SelfTest.Report> selfTest) {
        return new BackendChoice(BackendKind.CPU, reason, selfTest,
                capacity -> new CpuDecoder(model, capacity, KvCacheType.DEFAULT));
    }
}
