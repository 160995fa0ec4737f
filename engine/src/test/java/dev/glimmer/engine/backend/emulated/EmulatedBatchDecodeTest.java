package dev.glimmer.engine.backend.emulated;

import static dev.glimmer.engine.backend.SequencePool.Readout.LOGITS;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.commandlist.CommandListPool;
import dev.glimmer.engine.backend.cpu.FloatActivationBackend;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import dev.glimmer.kernels.emulator.FiberOrder;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The batch decode list on the emulator: several conversations of one KV pool, each at its own position in its
 * own slot, step together; every row's logits agree with the engine's forward pass of that conversation alone
 * (1e-3 of the logit range) and every conversation's greedy tokens equal the same request run alone through the
 * decode step. The batch shrinks as conversations end (3 rows in the 4-row list, 2, then the decode step alone), and a freed
 * slot is taken by a new conversation whose old rows must not leak into it.
 */
class EmulatedBatchDecodeTest {

    private static final int STEPS = 4;
    private static final double TOLERANCE = 1e-3;
    /** Prompt tokens of each conversation: prefixes of the chat prompt of different lengths (different positions). */
    private static final int[] CUT = {0, 5, 9};

    // One model: the emulator runs every threadgroup of a batch list, used or not, so each model costs about 90 s
    // of CI; CudaBatchDecodeTest takes three on the device.
    @ParameterizedTest
    @ValueSource(strings = {"tiny-q4_0"})
    void batchedConversationsMatchEachRunAlone(String name) throws IOException {
        try (GlmModel model = GlmModel.open(Oracle.model(name))) {
            int[] chat = Oracle.chatCase(name).promptTokens();
            int context = chat.length + STEPS + 1;
            List<int[]> prompts = new ArrayList<>();
            for (int cut : CUT) {
                prompts.add(Arrays.copyOf(chat, chat.length - cut));
            }
            // the same requests alone: prompt, then greedy steps through the decode step
            List<int[]> alone = new ArrayList<>();
            try (CommandListPool single = pool(model, context, 1, FiberOrder.inOrder())) {
                for (int[] p : prompts) {
                    try (SequencePool.Sequence q = single.open()) {
                        alone.add(greedyRun(
                                single.prompt(q, p, 0, p.length, LOGITS).logits(), single, q, STEPS + 1));
                    }
                }
            }
            GlmForward reference = new GlmForward(model, new FloatActivationBackend(), 1);
            try (CommandListPool pool = pool(model, context, 4, FiberOrder.shuffled(7))) {
                // a conversation that ends at once, so that the pool's first slot holds rows of another text
                try (SequencePool.Sequence gone = pool.open()) {
                    int[] other = Arrays.copyOfRange(chat, 3, chat.length);
                    pool.prompt(gone, other, 0, other.length, LOGITS);
                }
                List<SequencePool.Sequence> running = new ArrayList<>();
                List<KvCache> caches = new ArrayList<>();
                int[] pending = new int[prompts.size()];
                List<List<Integer>> got = new ArrayList<>();
                for (int i = 0; i < prompts.size(); i++) {
                    int[] p = prompts.get(i);
                    SequencePool.Sequence q = pool.open();
                    running.add(q);
                    KvCache cache = model.newCache(context, KvCacheType.GPU);
                    reference.forward(cache, p, 0, p.length - 1, false);
                    caches.add(cache);
                    pending[i] =
                            Oracle.argmax(pool.prompt(q, p, 0, p.length, LOGITS).logits(), 0, model.vocabSize());
                    got.add(new ArrayList<>(List.of(pending[i])));
                }
                // conversation i runs STEPS - i steps: rows drop out from the end of the batch
                for (int step = 0; step < STEPS; step++) {
                    List<Integer> rows = new ArrayList<>();
                    for (int i = 0; i < running.size(); i++) {
                        if (step < STEPS - i) {
                            rows.add(i);
                        }
                    }
                    List<SequencePool.Sequence> batch =
                            rows.stream().map(running::get).toList();
                    int[] tokens = rows.stream().mapToInt(i -> pending[i]).toArray();
                    SequencePool.Readout[] readouts = new SequencePool.Readout[rows.size()];
                    Arrays.fill(readouts, LOGITS);
                    SequencePool.Next[] next = pool.step(batch, tokens, readouts);
                    float[][] logits =
                            Arrays.stream(next).map(SequencePool.Next::logits).toArray(float[][]::new);
                    int[] greedy = Arrays.stream(next)
                            .mapToInt(SequencePool.Next::greedyToken)
                            .toArray();
                    for (int r = 0; r < rows.size(); r++) {
                        int i = rows.get(r);
                        int[] p = prompts.get(i);
                        KvCache cache = caches.get(i);
                        if (step == 0) {
                            reference.forward(cache, p, p.length - 1, 1, false);
                        }
                        float[] expected = reference.forward(cache, new int[] {tokens[r]}, 0, 1, false);
                        String where = name + " conversation " + i + " step " + step + " of " + rows.size() + " rows";
                        assertEquals(
                                Oracle.assertGpuLogits(where, expected, logits[r], greedy[r], TOLERANCE),
                                greedy[r],
                                where);
                        pending[i] = greedy[r];
                        got.get(i).add(greedy[r]);
                    }
                }
                for (int i = 0; i < prompts.size(); i++) {
                    int[] batched =
                            got.get(i).stream().mapToInt(Integer::intValue).toArray();
                    assertArrayEquals(
                            Arrays.copyOf(alone.get(i), batched.length),
                            batched,
                            name + " conversation " + i + ": batched greedy tokens differ from the request run alone");
                    running.get(i).close();
                }
            }
        }
    }

    /** An emulated pool of {@code slots} sequences of {@code context} positions, prompts in batches of 4. */
    private static CommandListPool pool(GlmModel model, int context, int slots, FiberOrder order) {
        return new CommandListPool(model, new EmulatorRunner(model, order), slots, context, 4);
    }

    /** The first token from {@code logits}, then greedy steps of {@code q} alone: {@code count} tokens in all. */
    private static int[] greedyRun(float[] logits, SequencePool pool, SequencePool.Sequence q, int count) {
        int[] out = new int[count];
        out[0] = Oracle.argmax(logits, 0, logits.length);
        for (int k = 1; k < count; k++) {
            float[] next =
                    pool.step(List.of(q), new int[] {out[k - 1]}, new SequencePool.Readout[] {LOGITS})[0].logits();
            out[k] = Oracle.argmax(next, 0, next.length);
        }
        return out;
    }
}
