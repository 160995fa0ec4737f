package dev.glimmer.server.inference;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.glimmer.engine.backend.BackendChoice;
import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.EmulatedTokenDecoder;
import dev.glimmer.engine.backend.emulated.DecodeModels;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.sampling.Sampler;
import dev.glimmer.server.EngineTestData;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.util.List;
import java.util.Optional;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

/**
 * Decode steps on GPU-style decoders (the GPU decode step on the CPU kernel emulator; needs clang-19):
 * a greedy sequence gets its greedy token without logits, and that token is what the logits of a twin
 * sequence, stepped alongside on the same tokens, pick; a third twin that bans its greedy token gets its
 * logits instead; the run is llama.cpp's greedy run.
 */
class DecoderStepRunnerTest {

    @Test
    void greedySequencesGetTheTokenTheirLogitsWouldGiveUnlessTheyBanIt() throws IOException {
        JsonNode oracle = new ObjectMapper().readTree(EngineTestData.ORACLE.resolve("refs/tiny-f32.logits.json").toFile())
                .get("cases").get(0);
        int[] prompt = ints(oracle.get("prompt_tokens"));
        int[] expected = ints(oracle.get("greedy_tokens"));
        try (GlmModel model = GlmModel.open(EngineTestData.model("tiny-f32"));
             DecoderStepRunner runner = new DecoderStepRunner(new BackendChoice(BackendKind.EMULATED, "the kernel emulator",
                     Optional.empty(), EmulatedTokenDecoder.decoders(model)), DecodeModels.of(model.file(), model.config()),
                     prompt.length + expected.length, 0, 2)) {
            DecoderStepRunner.DecoderCache greedy = runner.newCache();
            DecoderStepRunner.DecoderCache withLogits = runner.newCache();
            DecoderStepRunner.DecoderCache banning = runner.newCache();
            float[] logits = runner.prefill(greedy, prompt, 0, prompt.length);
            int[] run = new int[expected.length];
            run[0] = Sampler.argmax(logits, logits.length);
            runner.prefill(withLogits, prompt, 0, prompt.length);
            runner.prefill(banning, prompt, 0, prompt.length);
            for (int k = 1; k < run.length; k++) {
                int[] tokens = {run[k - 1], run[k - 1], run[k - 1]};
                // the first bans a token that is not its greedy one; the third bans its greedy one
                StepRunner.NextToken[] next = runner.decode(List.of(greedy, withLogits, banning), tokens,
                        new SequencePool.Readout[] {SequencePool.Readout.greedyBanning(new int[] {expected[k] + 1}),
                                SequencePool.Readout.LOGITS, SequencePool.Readout.greedyBanning(new int[] {expected[k]})}).results();
                assertNull(next[0].logits(), "step " + k + ": a greedy sequence gets no logits");
                assertNotNull(next[1].logits(), "step " + k + ": the sequence that asked gets its logits");
                assertNotNull(next[2].logits(), "step " + k + ": a sequence whose greedy token it bans gets its logits");
                assertArrayEquals(next[1].logits(), next[2].logits(), "step " + k);
                assertEquals(Sampler.argmax(next[1].logits(), next[1].logits().length), next[0].greedyToken(),
                        "step " + k + ": the greedy token is the logits' first maximum");
                run[k] = next[0].greedyToken();
            }
            assertArrayEquals(expected, run);
            greedy.close();
            withLogits.close();
            banning.close();
        }
    }

    private static int[] ints(JsonNode array) {
        int[] out = new int[array.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = array.get(i).asInt();
        }
        return out;
    }
}
