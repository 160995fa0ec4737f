package dev.glimmer.engine.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.commandlist.CommandListPool;
import dev.glimmer.engine.backend.cpu.FloatActivationBackend;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The batch decode graphs on the device (EmulatedBatchDecodeTest's checks): conversations of one KV pool at
 * different positions step together; every row's logits agree with the engine's forward pass of that
 * conversation alone and every conversation's greedy tokens equal the same request run alone. Then 16
 * conversations with random ends and new starts, each step launched and then waited for (as the server runs them):
 * the survivors stay right and the device memory is the pool's, nothing more, once all are closed.
 */
class CudaBatchDecodeTest {

    private static final int STEPS = 8;
    private static final double TOLERANCE = 1e-3;

    @ParameterizedTest
    @ValueSource(strings = {"tiny-f32", "tiny-q4_0", "small-q4_k_m"})
    void batchedConversationsMatchEachRunAlone(String name) throws IOException {
        CudaKernels kernels = CudaTestSupport.kernels();
        try (GlmModel model = GlmModel.open(Oracle.model(name));
                CudaWeights weights = new CudaWeights(model, kernels, bytes -> {})) {
            int[] chat = Oracle.chatCase(name).promptTokens();
            int context = chat.length + STEPS + 1;
            int conversations = 5; // 5 rows run the 8-row graph, then 4, 3, 2 rows, then the decode step alone
            List<int[]> prompts = new ArrayList<>();
            for (int i = 0; i < conversations; i++) {
                prompts.add(Arrays.copyOf(chat, chat.length - 2 * i));
            }
            List<int[]> alone = new ArrayList<>();
            try (CommandListPool single = CudaTestSupport.pool(weights, 1, context)) {
                for (int[] p : prompts) {
                    try (SequencePool.Sequence q = single.open()) {
                        int[] run = new int[STEPS + 1];
                        float[] logits = single.prompt(q, p, 0, p.length, SequencePool.Readout.LOGITS)
                                .logits();
                        run[0] = Oracle.argmax(logits, 0, logits.length);
                        for (int k = 1; k < run.length; k++) {
                            logits = CudaTestSupport.step(single, q, run[k - 1]).logits();
                            run[k] = Oracle.argmax(logits, 0, logits.length);
                        }
                        alone.add(run);
                    }
                }
            }
            GlmForward reference = new GlmForward(model, new FloatActivationBackend(), 1);
            try (CommandListPool pool = CudaTestSupport.pool(weights, conversations + 1, context)) {
                try (SequencePool.Sequence gone = pool.open()) { // leaves rows of another text in slot 0
                    int[] other = Arrays.copyOfRange(chat, 3, chat.length);
                    pool.prompt(gone, other, 0, other.length, SequencePool.Readout.LOGITS);
                }
                List<SequencePool.Sequence> running = new ArrayList<>();
                List<KvCache> caches = new ArrayList<>();
                int[] pending = new int[conversations];
                int[][] got = new int[conversations][STEPS + 1];
                for (int i = 0; i < conversations; i++) {
                    int[] p = prompts.get(i);
                    SequencePool.Sequence q = pool.open();
                    running.add(q);
                    KvCache cache = model.newCache(context, KvCacheType.GPU);
                    reference.forward(cache, p, 0, p.length, false);
                    caches.add(cache);
                    float[] logits = pool.prompt(q, p, 0, p.length, SequencePool.Readout.LOGITS)
                            .logits();
                    pending[i] = Oracle.argmax(logits, 0, logits.length);
                    got[i][0] = pending[i];
                }
                for (int step = 0; step < STEPS; step++) {
                    List<Integer> rows = new ArrayList<>();
                    for (int i = 0; i < conversations; i++) {
                        if (step < STEPS - i) {
                            rows.add(i);
                        }
                    }
                    int[] tokens = rows.stream().mapToInt(i -> pending[i]).toArray();
                    float[][] expected = new float[rows.size()][];
                    SequencePool.Readout[] readouts = new SequencePool.Readout[rows.size()];
                    for (int r = 0; r < rows.size(); r++) {
                        expected[r] = reference
                                .forward(caches.get(rows.get(r)), new int[] {tokens[r]}, 0, 1, false)
                                .clone();
                        int first = Oracle.argmax(expected[r], 0, expected[r].length);
                        // even rows read back their logits, odd rows only their token; row 1 mod 4 bans a token
                        // that is not its greedy one, row 3 mod 4 bans its greedy token and so gets its logits
                        readouts[r] = switch (r % 4) {
                            case 1 -> SequencePool.Readout.greedyBanning(new int[] {(first + 1) % expected[r].length});
                            case 3 -> SequencePool.Readout.greedyBanning(new int[] {first});
                            default -> SequencePool.Readout.LOGITS;
                        };
                    }
                    SequencePool.Next[] next =
                            pool.step(rows.stream().map(running::get).toList(), tokens, readouts);
                    for (int r = 0; r < rows.size(); r++) {
                        int i = rows.get(r);
                        String where = name + " conversation " + i + " step " + step + " of " + rows.size() + " rows";
                        int token;
                        if (r % 4 == 1) {
                            assertNull(next[r].logits(), where + ": a greedy row gets its token alone");
                            token = next[r].greedyToken();
                        } else {
                            assertNotNull(next[r].logits(), where + ": logits, asked for or for a banned greedy token");
                            token = Oracle.argmax(next[r].logits(), 0, next[r].logits().length);
                            Oracle.assertGpuLogits(where, expected[r], next[r].logits(), token, TOLERANCE);
                        }
                        pending[i] = token;
                        got[i][step + 1] = token;
                    }
                }
                for (int i = 0; i < conversations; i++) {
                    int steps = STEPS - i;
                    assertArrayEquals(
                            Arrays.copyOf(alone.get(i), steps + 1),
                            Arrays.copyOf(got[i], steps + 1),
                            name + " conversation " + i + ": batched greedy tokens differ from the request run alone");
                    running.get(i).close();
                }
            }
        }
    }

    @Test
    void sixteenConversationsComeAndGoWithoutLeaking() throws IOException {
        CudaKernels kernels = CudaTestSupport.kernels();
        String name = "tiny-q4_0";
        try (GlmModel model = GlmModel.open(Oracle.model(name));
                CudaWeights weights = new CudaWeights(model, kernels, bytes -> {})) {
            int[] chat = Oracle.chatCase(name).promptTokens();
            int context = chat.length + 40;
            CudaDevice device = kernels.device();
            long before = device.memoryUsed();
            Random random = new Random(16);
            try (CommandListPool pool = CudaTestSupport.pool(weights, 16, context)) {
                long withPool = device.memoryUsed();
                List<SequencePool.Sequence> open = new ArrayList<>();
                List<int[]> expected = new ArrayList<>();
                List<Integer> done = new ArrayList<>();
                GlmForward reference = new GlmForward(model, new FloatActivationBackend(), 1);
                for (int round = 0; round < 24; round++) {
                    // random ends (a client gone) and new conversations up to 16
                    for (int i = open.size() - 1; i >= 0; i--) {
                        if (random.nextInt(5) == 0 || done.get(i) >= 30) {
                            open.remove(i).close();
                            expected.remove(i);
                            done.remove(i);
                        }
                    }
                    while (open.size() < 16) {
                        SequencePool.Sequence q = pool.open();
                        int cut = random.nextInt(8);
                        int[] p = Arrays.copyOf(chat, chat.length - cut);
                        float[] logits = pool.prompt(q, p, 0, p.length, SequencePool.Readout.LOGITS)
                                .logits();
                        // the greedy run this conversation must follow, from the CPU reference
                        KvCache cache = model.newCache(context, KvCacheType.GPU);
                        float[] ref = reference.forward(cache, p, 0, p.length, false);
                        int[] run = new int[31];
                        run[0] = Oracle.argmax(ref, 0, ref.length);
                        for (int k = 1; k < run.length; k++) {
                            ref = reference.forward(cache, new int[] {run[k - 1]}, 0, 1, false);
                            run[k] = Oracle.argmax(ref, 0, ref.length);
                        }
                        assertEquals(
                                run[0], Oracle.argmax(logits, 0, logits.length), "first token of a new conversation");
                        open.add(q);
                        expected.add(run);
                        done.add(0);
                    }
                    int[] tokens = new int[open.size()];
                    for (int i = 0; i < tokens.length; i++) {
                        tokens[i] = expected.get(i)[done.get(i)];
                    }
                    SequencePool.Readout[] greedy = new SequencePool.Readout[tokens.length];
                    Arrays.fill(greedy, SequencePool.Readout.GREEDY);
                    // launched, then waited for, as the server runs its steps
                    SequencePool.Next[] next = pool.launch(open, tokens, greedy).results();
                    for (int i = 0; i < tokens.length; i++) {
                        done.set(i, done.get(i) + 1);
                        assertEquals(
                                expected.get(i)[done.get(i)], next[i].greedyToken(), "round " + round + " row " + i);
                    }
                }
                open.forEach(SequencePool.Sequence::close);
                assertEquals(withPool, device.memoryUsed(), "the conversations took no device memory beyond the pool");
            }
            assertEquals(before, device.memoryUsed(), "the pool's memory is back after it closed");
        }
    }
}
