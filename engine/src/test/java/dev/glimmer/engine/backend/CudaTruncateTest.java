package dev.glimmer.engine.backend;

import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What the server and {@code bench} use of a CUDA sequence beyond decoding: {@link TokenDecoder#truncate}
 * for session reuse (as {@link TokenDecoderTruncateTest} checks it on the CPU and the emulator), the
 * device memory a sequence and the backend report, and the per-kernel timing of a step. GPU tests:
 * skipped, with the reason, where there is no CUDA device.
 */
class CudaTruncateTest {

    @BeforeEach
    void needsADevice() {
        Assumptions.assumeTrue(CudaChoice.available(), "GPU test skipped: " + CudaChoice.unavailable());
    }

    @Test
    void aTruncatedSequenceContinuesAsAFreshOneWouldWithTheSamePrefix() throws IOException {
        try (GlmModel model = GlmModel.open(Oracle.model(TokenDecoderTruncateTest.MODEL));
             BackendChoice choice = Backends.choose(BackendKind.CUDA, model, false)) {
            TokenDecoderTruncateTest.truncatedSequenceContinuesAsAFreshOne(choice::open);
            TokenDecoderTruncateTest.bytesGrowWithCapacity(model, choice::open);
        }
    }

    @Test
    void theBackendReportsItsDeviceMemoryAndASequenceItsKernelTimes() throws IOException {
        try (GlmModel model = GlmModel.open(Oracle.model(TokenDecoderTruncateTest.MODEL));
             BackendChoice choice = Backends.choose(BackendKind.CUDA, model, false);
             TokenDecoder decoder = choice.open(16)) {
            long used = choice.gpuMemoryUsed().orElseThrow();
            assertTrue(used >= decoder.bytes(), used + " bytes used on the device, the sequence alone holds " + decoder.bytes());
            decoder.forward(new int[] {1, 2}, 0, 2);
            KernelTimings.Profile profile = ((KernelTimings) decoder).profileStep(3);
            List<KernelTimings.KernelTime> times = profile.kernels();
            assertTrue(profile.stepMillis() > 0 && profile.copyGigabytesPerSecond() > 0, profile.toString());
            assertEquals(3, decoder.position(), "the profiled step is a real one");
            int dispatches = times.stream().mapToInt(KernelTimings.KernelTime::dispatches).sum();
            assertEquals(((PartialSteps) decoder).commandList().dispatches().size(), dispatches);
            assertTrue(times.stream().allMatch(t -> t.millis() >= 0), times.toString());
            for (int i = 1; i < times.size(); i++) {
                assertTrue(times.get(i - 1).millis() >= times.get(i).millis(), "largest first: " + times);
            }
        }
    }
}
