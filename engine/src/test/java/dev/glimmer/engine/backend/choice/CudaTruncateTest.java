package dev.glimmer.engine.backend.choice;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.KernelTimings;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.SequencePoolTest;
import dev.glimmer.engine.backend.commandlist.CommandListPool;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import java.io.IOException;
import java.util.List;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * What the server and {@code bench} use of a CUDA sequence beyond decoding: {@link SequencePool.Sequence#truncate}
 * for session reuse (as {@link SequencePoolTest} checks it on the CPU and the emulator), the
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
        try (GlmModel model = GlmModel.open(Oracle.model(SequencePoolTest.MODEL));
                BackendChoice choice = Backends.choose(BackendKind.CUDA, model, false, Backends.CpuOptions.DEFAULT)) {
            SequencePoolTest.truncatedSequenceContinuesAsAFreshOne(capacity -> choice.pool(1, capacity));
            SequencePoolTest.bytesGrowWithCapacity(model, capacity -> choice.pool(1, capacity));
        }
    }

    /** Prefix sharing and the RAM/disk tiers on CUDA: KV rows copied between slots, read out and written back. */
    @Test
    void aCopiedOrImportedPrefixContinuesAsTheSequenceThatComputedIt() throws IOException {
        try (GlmModel model = GlmModel.open(Oracle.model(SequencePoolTest.MODEL));
                BackendChoice choice = Backends.choose(BackendKind.CUDA, model, false, Backends.CpuOptions.DEFAULT)) {
            SequencePoolTest.copiedOrImportedPrefixContinues(slots -> choice.pool(slots, 16));
        }
    }

    @Test
    void theBackendReportsItsDeviceMemoryAndASequenceItsKernelTimes() throws IOException {
        try (GlmModel model = GlmModel.open(Oracle.model(SequencePoolTest.MODEL));
                BackendChoice choice = Backends.choose(BackendKind.CUDA, model, false, Backends.CpuOptions.DEFAULT);
                CommandListPool pool = (CommandListPool) choice.pool(1, 16);
                SequencePool.Sequence sequence = pool.open()) {
            long used = choice.gpuMemoryUsed().orElseThrow();
            assertTrue(used >= pool.bytes(), used + " bytes used on the device, the pool alone holds " + pool.bytes());
            pool.prompt(sequence, new int[] {1, 2}, 0, 2, SequencePool.Readout.LOGITS);
            KernelTimings.Profile profile = pool.timings().orElseThrow().profileStep(List.of(sequence), new int[] {3});
            List<KernelTimings.KernelTime> times = profile.kernels();
            assertTrue(profile.stepMillis() > 0 && profile.copyGigabytesPerSecond() > 0, profile.toString());
            assertEquals(3, sequence.position(), "the profiled step is a real one");
            int dispatches = times.stream()
                    .mapToInt(KernelTimings.KernelTime::dispatches)
                    .sum();
            assertEquals(pool.commandList().dispatches().size(), dispatches);
            assertTrue(times.stream().allMatch(t -> t.millis() >= 0), times.toString());
            for (int i = 1; i < times.size(); i++) {
                assertTrue(times.get(i - 1).millis() >= times.get(i).millis(), "largest first: " + times);
            }
        }
    }
}
