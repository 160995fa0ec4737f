package dev.glimmer.engine.backend;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.backend.metal.MetalPlatform;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmModel;

import java.util.List;
import java.util.Optional;

/**
 * Chooses the backend for {@code --backend auto|cpu|metal|cuda}. {@code auto} takes Metal on macOS
 * on Apple Silicon, else CUDA where an NVIDIA device is present, when the model's shape fits the
 * GPU decode step and the self-test passes; otherwise the CPU, saying why. A failed GPU self-test
 * always falls back to the CPU: wrong tokens are worse than slow ones. The Metal classes are
 * touched only on macOS.
 */
public final class Backends {

    public static final List<String> NAMES = List.of("auto", "cpu", "metal", "cuda");

    private Backends() {
    }

    /** {@link #choose(String, GlmModel, boolean)} with the self-test. */
    public static BackendChoice choose(String requested, GlmModel model) {
        return choose(requested, model, true);
    }

    /**
     * @param requested one of {@link #NAMES}
     * @param selfTest  whether Metal must pass the self-test first ({@code false}: trust it untested)
     * @throws InvalidInputException for an unknown name, or {@code metal}/{@code cuda} where this build cannot run them
     */
    public static BackendChoice choose(String requested, GlmModel model, boolean selfTest) {
        return switch (requested) {
            case "cpu" -> cpu(model, "asked for with --backend cpu");
            case "cuda" -> CudaChoice.choose(model, selfTest, true, System.err);
            case "metal" -> {
                if (!MetalPlatform.isMacArm64()) {
                    throw new InvalidInputException("--backend metal: " + metalUnavailable());
                }
                yield MetalChoice.choose(model, selfTest);
            }
            case "auto" -> MetalPlatform.isMacArm64() ? MetalChoice.choose(model, selfTest)
                    : CudaChoice.choose(model, selfTest, false, System.err);
            default -> throw new InvalidInputException("unknown backend '" + requested + "' (" + String.join(", ", NAMES) + ")");
        };
    }

    /** The GPU backends the self-test can check. */
    public static final List<String> SELF_TEST_NAMES = List.of("auto", "metal", "cuda", "emulated");

    /**
     * Runs the self-test of a GPU path: {@code metal}, {@code cuda}, {@code emulated} (the kernels on
     * the CPU emulator, which needs clang-19), or {@code auto}: Metal or CUDA where it can run, else
     * the emulator.
     *
     * @throws InvalidInputException for an unknown name, {@code metal} off macOS/arm64, or {@code cuda} without a device
     */
    public static SelfTest.Report selfTest(String backend) {
        return switch (backend) {
            case "auto" -> selfTest(MetalPlatform.isMacArm64() ? "metal" : CudaChoice.available() ? "cuda" : "emulated");
            case "cuda" -> CudaChoice.selfTest();
            case "metal" -> {
                if (!MetalPlatform.isMacArm64()) {
                    throw new InvalidInputException("--backend metal: " + metalUnavailable());
                }
                yield MetalChoice.selfTest();
            }
            case "emulated" -> SelfTest.run("emulated", EmulatedTokenDecoder::new);
            default -> throw new InvalidInputException("unknown backend '" + backend + "' for the self-test ("
                    + String.join(", ", SELF_TEST_NAMES) + ")");
        };
    }

    /** Why Metal cannot run here. */
    public static String metalUnavailable() {
        return "Metal needs macOS on Apple Silicon, this is " + MetalPlatform.describe();
    }

    static BackendChoice cpu(GlmModel model, String reason) {
        return cpu(model, reason, Optional.empty());
    }

    static BackendChoice cpu(GlmModel model, String reason, Optional<SelfTest.Report> selfTest) {
        return new BackendChoice("cpu", reason, selfTest, capacity -> new CpuDecoder(model, capacity, KvCacheType.DEFAULT));
    }
}
