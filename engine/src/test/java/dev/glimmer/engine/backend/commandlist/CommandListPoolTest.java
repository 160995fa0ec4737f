package dev.glimmer.engine.backend.commandlist;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.emulated.EmulatorRunner;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import dev.glimmer.engine.sampling.Sampler;
import java.io.IOException;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The readouts of a {@link CommandListPool}'s decode steps (the GPU command lists on the CPU kernel emulator; needs
 * clang-19): a greedy sequence gets its greedy token without logits, and that token is what the logits of a twin
 * sequence, stepped alongside on the same tokens, pick; a third twin that bans its greedy token gets its logits
 * instead; the run is llama.cpp's greedy run.
 */
class CommandListPoolTest {

    @Test
    void greedySequencesGetTheTokenTheirLogitsWouldGiveUnlessTheyBanIt() throws IOException {
        Oracle.Case oracle = Oracle.cases("tiny-f32").getFirst();
        int[] prompt = oracle.promptTokens();
        int[] expected = oracle.greedyTokens();
        try (GlmModel model = GlmModel.open(Oracle.model("tiny-f32"));
                SequencePool pool = EmulatorRunner.pool(model, 4, prompt.length + expected.length)) {
            SequencePool.Sequence greedy = pool.open();
            SequencePool.Sequence withLogits = pool.open();
            SequencePool.Sequence banning = pool.open();
            float[] logits = pool.prompt(greedy, prompt, 0, prompt.length, SequencePool.Readout.LOGITS)
                    .logits();
            int[] run = new int[expected.length];
            run[0] = Sampler.argmax(logits, logits.length);
            pool.prompt(withLogits, prompt, 0, prompt.length, SequencePool.Readout.LOGITS);
            pool.prompt(banning, prompt, 0, prompt.length, SequencePool.Readout.LOGITS);
            for (int k = 1; k < run.length; k++) {
                int[] tokens = {run[k - 1], run[k - 1], run[k - 1]};
                // the first bans a token that is not its greedy one; the third bans its greedy one
                SequencePool.Next[] next = pool.launch(
                                List.of(greedy, withLogits, banning), tokens, new SequencePool.Readout[] {
                                    SequencePool.Readout.greedyBanning(new int[] {expected[k] + 1}),
                                    SequencePool.Readout.LOGITS,
                                    SequencePool.Readout.greedyBanning(new int[] {expected[k]})
                                })
                        .results();
                assertNull(next[0].logits(), "step " + k + ": a greedy sequence gets no logits");
                assertNotNull(next[1].logits(), "step " + k + ": the sequence that asked gets its logits");
                assertNotNull(
                        next[2].logits(), "step " + k + ": a sequence whose greedy token it bans gets its logits");
                assertArrayEquals(next[1].logits(), next[2].logits(), "step " + k);
                assertEquals(
                        Sampler.argmax(next[1].logits(), next[1].logits().length),
                        next[0].greedyToken(),
                        "step " + k + ": the greedy token is the logits' first maximum");
                run[k] = next[0].greedyToken();
            }
            assertArrayEquals(expected, run);
            greedy.close();
            withLogits.close();
            banning.close();
        }
    }
}
