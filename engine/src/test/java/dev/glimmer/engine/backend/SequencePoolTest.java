package dev.glimmer.engine.backend;

import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.util.Arrays;
import java.util.List;

import static dev.glimmer.engine.backend.SequencePool.Readout.GREEDY;
import static dev.glimmer.engine.backend.SequencePool.Readout.LOGITS;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * {@link SequencePool#oneByOne}, the pool of backends without a batch step, over real CPU decoders: it counts its
 * open sequences (what {@code /metrics} shows of a pool), refuses more than its slots, and a step gives each
 * sequence what a forward pass of it alone gives.
 */
class SequencePoolTest {

    @Test
    void oneByOneCountsItsOpenSequencesAndStepsEachAsItsOwnForwardPass() throws IOException {
        try (GlmModel model = GlmModel.open(Oracle.model("tiny-q8_0"));
             CpuDecoder alone = new CpuDecoder(model, 8, KvCacheType.F32)) {
            BackendChoice.Decoders cpu = capacity -> new CpuDecoder(model, capacity, KvCacheType.F32);
            try (SequencePool pool = SequencePool.oneByOne(cpu, 2, 8)) {
                long each = pool.bytesPerSequence();
                assertEquals(alone.bytes(), each);
                assertEquals(0, pool.inUse());
                assertEquals(0, pool.bytes());
                TokenDecoder a = pool.open();
                TokenDecoder b = pool.open();
                assertEquals(2, pool.inUse());
                assertEquals(2 * each, pool.bytes());
                assertEquals("all 2 sequences of the pool are in use",
                        assertThrows(IllegalStateException.class, pool::open).getMessage());

                int[] prompt = Arrays.copyOf(Oracle.chatCase("tiny-q8_0").promptTokens(), 3);
                a.forward(prompt, 0, 3);
                b.forward(prompt, 0, 1);
                SequencePool.Next[] next = pool.step(List.of(a, b), new int[] {prompt[2], prompt[1]}, new SequencePool.Readout[] {LOGITS, GREEDY});
                alone.forward(prompt, 0, 3);
                assertArrayEquals(alone.forward(new int[] {prompt[2]}, 0, 1), next[0].logits());
                assertEquals(List.of(4, 2), List.of(a.position(), b.position()));
                try (CpuDecoder other = new CpuDecoder(model, 8, KvCacheType.F32)) {
                    assertEquals(other.forwardGreedy(new int[] {prompt[0], prompt[1]}, 0, 2), next[1].greedyToken());
                }

                a.close();
                a.close();
                assertEquals(1, pool.inUse(), "a sequence closed twice is counted once");
                pool.open().close();
                b.close();
                assertEquals(0, pool.inUse());
            }
        }
    }
}
