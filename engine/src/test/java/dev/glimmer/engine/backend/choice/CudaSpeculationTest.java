package dev.glimmer.engine.backend.choice;

import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.backend.emulated.EmulatedSpeculationTest;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;
import java.nio.file.Path;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Speculative decoding through the CUDA graphs of the command lists, with the checks {@link EmulatedSpeculationTest}
 * runs on the emulator: the drafts and the verification's rows against the engine's forward pass, and greedy generation
 * with drafts equal to generation without them. GPU test: skipped, with the reason, where there is no CUDA device.
 */
class CudaSpeculationTest {

    @TempDir
    Path dir;

    @Test
    void speculativeStepsOnTheDeviceGiveWhatTheEngineGives() throws Exception {
        Assumptions.assumeTrue(CudaChoice.available(), "GPU test skipped: " + CudaChoice.unavailable());
        try (GlmModel model = EmulatedSpeculationTest.tinyModelWithTheBlock(dir);
                BackendChoice plain = choose(model, 0);
                BackendChoice drafting = choose(model, 1)) {
            EmulatedSpeculationTest.Pools pools =
                    (drafts, capacity) -> (drafts > 0 ? drafting : plain).pool(1, capacity);
            EmulatedSpeculationTest.theDraftsAreTheEnginesAndTheVerifiedRowsTheTrunks(model, pools);
            EmulatedSpeculationTest.greedyTokensAreThoseOfDecodingWithoutDrafts(model, pools);
        }
    }

    private static BackendChoice choose(GlmModel model, int drafts) {
        return Backends.choose(
                BackendKind.CUDA,
                model,
                false,
                new Backends.CpuOptions(
                        CpuBackend.defaultThreads(), KvCacheType.DEFAULT, GlmForward.DEFAULT_BATCH, drafts));
    }
}
