package dev.glimmer.engine.backend.choice;

import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.commandlist.ChainedDecodeTest;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import java.io.IOException;
import java.util.Arrays;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * Greedy steps chained on a CUDA device give exactly what steps one at a time give, as {@link ChainedDecodeTest}
 * checks on the emulator: here the steps really run ahead of the host (a CUDA event per step's reads), so a token read
 * before its copy landed would show. GPU test: skipped, with the reason, where there is no CUDA device.
 */
class CudaChainedDecodeTest {

    @Test
    void chainedStepsHearWhatStepsOneAtATimeGive() throws IOException {
        Assumptions.assumeTrue(CudaChoice.available(), "GPU test skipped: " + CudaChoice.unavailable());
        try (GlmModel model = GlmModel.open(Oracle.model("tiny-q4_0"));
                BackendChoice choice = Backends.choose(BackendKind.CUDA, model, false, Backends.CpuOptions.DEFAULT)) {
            ChainedDecodeTest.Chains chains = new ChainedDecodeTest.Chains(
                    choice::pool, Arrays.copyOf(Oracle.chatCase("tiny-q4_0").promptTokens(), 8));
            chains.oneSequence();
            chains.aBannedGreedyTokenInTheMiddle();
            chains.aStoppedRowGoesOn();
            chains.twoSequences();
        }
    }
}
