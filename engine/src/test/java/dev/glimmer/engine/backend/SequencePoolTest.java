package dev.glimmer.engine.backend;

import static dev.glimmer.engine.backend.SequencePool.Readout.GREEDY;
import static dev.glimmer.engine.backend.SequencePool.Readout.LOGITS;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.backend.cpu.CpuSequencePool;
import dev.glimmer.engine.backend.emulated.EmulatorRunner;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import dev.glimmer.engine.sampling.Sampler;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.List;
import java.util.function.IntFunction;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The {@link SequencePool} contract on the CPU's pool and on the command-list pool (on the kernel emulator;
 * {@code CudaTruncateTest} on a CUDA device): a pool counts its open sequences (what {@code /metrics} shows of a
 * pool), refuses more than its slots and sequences of another pool, steps several sequences as each alone, and a
 * sequence cut back to a shared prefix ({@link SequencePool.Sequence#truncate}, what the server's session reuse relies
 * on) continues exactly as a fresh one fed the prefix and the new tokens.
 */
public class SequencePoolTest {
    /** The oracle model the checks run on. */
    public static final String MODEL = "tiny-q8_0";

    private static final int CAPACITY = 16;
    private static final int KEPT = 5;

    private static SequencePool pool(String backend, GlmModel model, int slots, int capacity) {
        return switch (backend) {
            case "cpu" ->
                new CpuSequencePool(
                        model, new CpuBackend(), slots, capacity, KvCacheType.F32, GlmForward.DEFAULT_BATCH);
            case "emulated" -> EmulatorRunner.pool(model, slots, capacity);
            default -> throw new IllegalArgumentException(backend);
        };
    }

    @Test
    void theCpuPoolCountsItsSequencesAndStepsThemTogetherAsEachAlone() throws IOException {
        try (GlmModel model = GlmModel.open(Oracle.model(MODEL));
                SequencePool pool = pool("cpu", model, 2, 8);
                SequencePool other = pool("cpu", model, 1, 8)) {
            long each = pool.bytesPerSequence();
            assertEquals(KvCache.bytes(model.config().layers(), model.config().kvRowWidth(), 8, KvCacheType.F32), each);
            assertEquals(0, pool.inUse());
            assertEquals(0, pool.bytes());
            SequencePool.Sequence a = pool.open();
            SequencePool.Sequence b = pool.open();
            assertEquals(2, pool.inUse());
            assertEquals(2 * each, pool.bytes());
            assertEquals(
                    "all 2 sequences of the pool are in use",
                    assertThrows(IllegalStateException.class, pool::open).getMessage());

            int[] prompt = Arrays.copyOf(Oracle.chatCase(MODEL).promptTokens(), 3);
            pool.prompt(a, prompt, 0, 3, LOGITS);
            pool.prompt(b, prompt, 0, 1, LOGITS);
            SequencePool.Next[] next = pool.step(
                    List.of(a, b), new int[] {prompt[2], prompt[1]}, new SequencePool.Readout[] {LOGITS, GREEDY});
            try (SequencePool.Sequence alone = other.open()) {
                other.prompt(alone, prompt, 0, 3, LOGITS);
                assertArrayEquals(
                        other.prompt(alone, new int[] {prompt[2]}, 0, 1, LOGITS).logits(), next[0].logits());
                alone.truncate(0);
                float[] logits = other.prompt(alone, prompt, 0, 2, LOGITS).logits();
                assertEquals(Sampler.argmax(logits, logits.length), Sampler.argmax(next[1].logits(), logits.length));
                assertThrows(
                        IllegalStateException.class,
                        () -> pool.prompt(alone, prompt, 0, 1, LOGITS),
                        "a sequence of another pool");
            }
            assertEquals(List.of(4, 2), List.of(a.position(), b.position()));
            assertEquals(
                    "sequence 1 appears twice in one step",
                    assertThrows(
                                    IllegalArgumentException.class,
                                    () -> pool.step(
                                            List.of(a, a), new int[] {1, 1}, new SequencePool.Readout[] {LOGITS, LOGITS
                                            }))
                            .getMessage());

            // a pool whose batch holds one row steps two sequences in two turns, each as it steps alone
            try (SequencePool narrow = new CpuSequencePool(model, new CpuBackend(), 2, 8, KvCacheType.F32, 1);
                    SequencePool.Sequence x = narrow.open();
                    SequencePool.Sequence y = narrow.open();
                    SequencePool.Sequence alone = other.open()) {
                narrow.prompt(x, prompt, 0, 1, LOGITS);
                narrow.prompt(y, prompt, 1, 1, LOGITS);
                SequencePool.Next[] turns = narrow.step(
                        List.of(x, y), new int[] {prompt[1], prompt[2]}, new SequencePool.Readout[] {LOGITS, LOGITS});
                other.prompt(alone, prompt, 0, 1, LOGITS);
                assertArrayEquals(other.prompt(alone, prompt, 1, 1, LOGITS).logits(), turns[0].logits());
                alone.truncate(0);
                other.prompt(alone, prompt, 1, 1, LOGITS);
                assertArrayEquals(other.prompt(alone, prompt, 2, 1, LOGITS).logits(), turns[1].logits());
                assertEquals(List.of(2, 2), List.of(x.position(), y.position()));
            }

            a.close();
            a.close();
            assertEquals(1, pool.inUse(), "a sequence closed twice is counted once");
            assertEquals(each, pool.bytes(), "a closed sequence's cache is freed");
            assertThrows(IllegalStateException.class, () -> pool.prompt(a, prompt, 0, 1, LOGITS), "a closed sequence");
            pool.open().close();
            b.close();
            assertEquals(0, pool.inUse());
        }
    }

    /**
     * The next parts of three prompts, at different depths, run as rows of one pass ({@link SequencePool#prompts}) give
     * each sequence the logits and the cache it gets from its own prompt call: the same last-token logits, and the same
     * logits after one more token (a pass of one row each).
     */
    @Test
    void theCpuPoolRunsSeveralPromptsInOnePassAsEachAlone() throws IOException {
        try (GlmModel model = GlmModel.open(Oracle.model(MODEL));
                SequencePool pool = pool("cpu", model, 3, 64);
                SequencePool other = pool("cpu", model, 1, 64)) {
            int[] prompt = Oracle.chatCase(MODEL).promptTokens();
            assertTrue(prompt.length >= 14, "the chat case's prompt has " + prompt.length + " tokens");
            int[] start = {5, 0, 2};
            int[] counts = {8, 10, 3};
            List<SequencePool.Sequence> sequences = List.of(pool.open(), pool.open(), pool.open());
            for (int i = 0; i < 3; i++) {
                if (start[i] > 0) {
                    pool.prompt(sequences.get(i), prompt, 0, start[i], LOGITS);
                }
            }
            SequencePool.Readout[] readouts = {LOGITS, LOGITS, LOGITS};
            SequencePool.Next[] together =
                    pool.prompts(sequences, List.of(prompt, prompt, prompt), start, counts, readouts);
            int[] ends = {13, 10, 5};
            SequencePool.Next[] after =
                    pool.prompts(sequences, List.of(prompt, prompt, prompt), ends, new int[] {1, 1, 1}, readouts);
            try (SequencePool.Sequence alone = other.open()) {
                for (int i = 0; i < 3; i++) {
                    alone.truncate(0);
                    int end = ends[i];
                    if (start[i] > 0) {
                        other.prompt(alone, prompt, 0, start[i], LOGITS);
                    }
                    float[] logits = other.prompt(alone, prompt, start[i], counts[i], LOGITS)
                            .logits();
                    assertArrayEquals(logits, together[i].logits(), "sequence " + i + "'s prompt");
                    assertEquals(end + 1, sequences.get(i).position());
                    assertArrayEquals(
                            other.prompt(alone, prompt, end, 1, LOGITS).logits(),
                            after[i].logits(),
                            "sequence " + i + "'s next token");
                }
            }
            sequences.forEach(SequencePool.Sequence::close);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"cpu", "emulated"})
    void aTruncatedSequenceContinuesAsAFreshOneWouldWithTheSamePrefix(String backend) throws IOException {
        try (GlmModel model = GlmModel.open(Oracle.model(MODEL))) {
            truncatedSequenceContinuesAsAFreshOne(capacity -> pool(backend, model, 1, capacity));
        }
    }

    /**
     * A prefix copied from another sequence ({@link SequencePool#copyPrefix}, prefix sharing) or exported and imported
     * into another pool of the same layout (the RAM and disk tiers) continues with exactly the logits of a sequence
     * that computed it; the copies land on other slots than the source's (other KV rows on a GPU).
     */
    @ParameterizedTest
    @ValueSource(strings = {"cpu", "emulated"})
    void aCopiedOrImportedPrefixContinuesAsTheSequenceThatComputedIt(String backend) throws IOException {
        try (GlmModel model = GlmModel.open(Oracle.model(MODEL))) {
            copiedOrImportedPrefixContinues(slots -> pool(backend, model, slots, CAPACITY));
        }
    }

    /** The check of {@link #aCopiedOrImportedPrefixContinuesAsTheSequenceThatComputedIt} on pools of {@link #MODEL} from {@code open}. */
    public static void copiedOrImportedPrefixContinues(IntFunction<SequencePool> open) {
        int[] prompt = Arrays.copyOf(Oracle.chatCase(MODEL).promptTokens(), 8);
        try (SequencePool pool = open.apply(2);
                SequencePool restarted = open.apply(2);
                Arena arena = Arena.ofConfined()) {
            assertEquals(pool.kvLayout(), restarted.kvLayout());
            assertTrue(
                    pool.bytesPerPosition() * CAPACITY <= pool.bytesPerSequence(), pool.bytesPerPosition() + " bytes");
            MemorySegment rows = arena.allocate(KEPT * pool.bytesPerPosition());
            float[] expected;
            try (SequencePool.Sequence computed = pool.open();
                    SequencePool.Sequence copy = pool.open()) {
                expected = pool.prompt(computed, prompt, 0, prompt.length, LOGITS)
                        .logits()
                        .clone();
                pool.prompt(copy, prompt, 0, 3, LOGITS); // rows the copy replaces
                pool.copyPrefix(computed, copy, KEPT);
                assertEquals(KEPT, copy.position());
                assertArrayEquals(
                        expected,
                        pool.prompt(copy, prompt, KEPT, prompt.length - KEPT, LOGITS)
                                .logits());
                pool.exportPrefix(computed, KEPT, rows);
                assertThrows(IllegalArgumentException.class, () -> pool.exportPrefix(computed, CAPACITY, rows));
            }
            try (SequencePool.Sequence first = restarted.open();
                    SequencePool.Sequence imported = restarted.open()) {
                restarted.importPrefix(imported, rows, KEPT);
                assertEquals(KEPT, imported.position());
                assertArrayEquals(
                        expected,
                        restarted
                                .prompt(imported, prompt, KEPT, prompt.length - KEPT, LOGITS)
                                .logits());
                assertThrows(
                        IllegalArgumentException.class,
                        () -> restarted.importPrefix(first, rows, KEPT + 1),
                        "fewer bytes than the positions need");
            }
        }
    }

    /** The memory a sequence costs grows with its capacity (the KV cache is most of it). */
    @ParameterizedTest
    @ValueSource(strings = {"cpu", "emulated"})
    void bytesGrowWithTheCapacity(String backend) throws IOException {
        try (GlmModel model = GlmModel.open(Oracle.model(MODEL))) {
            bytesGrowWithCapacity(model, capacity -> pool(backend, model, 1, capacity));
        }
    }

    /** The check of {@link #aTruncatedSequenceContinuesAsAFreshOneWouldWithTheSamePrefix} on {@link #MODEL}'s pools from {@code open}. */
    public static void truncatedSequenceContinuesAsAFreshOne(IntFunction<SequencePool> open) {
        int[] prompt = Arrays.copyOf(Oracle.chatCase(MODEL).promptTokens(), 8);
        // The same prefix, then three other tokens in place of the prompt's last three.
        int[] other = prompt.clone();
        other[KEPT] = prompt[KEPT + 2];
        other[KEPT + 1] = prompt[KEPT];
        other[KEPT + 2] = prompt[KEPT + 1];
        try (SequencePool pool = open.apply(CAPACITY)) {
            float[] expected;
            try (SequencePool.Sequence fresh = pool.open()) {
                expected = pool.prompt(fresh, other, 0, other.length, LOGITS)
                        .logits()
                        .clone();
            }
            try (SequencePool.Sequence reused = pool.open()) {
                float[] first = pool.prompt(reused, prompt, 0, prompt.length, LOGITS)
                        .logits()
                        .clone();
                assertEquals(prompt.length, reused.position());
                reused.truncate(KEPT);
                assertEquals(KEPT, reused.position());
                float[] got = pool.prompt(reused, other, KEPT, other.length - KEPT, LOGITS)
                        .logits();
                assertEquals(other.length, reused.position());
                assertArrayEquals(expected, got);
                assertTrue(!Arrays.equals(first, got), "the other tokens give other logits");

                assertThrows(IllegalArgumentException.class, () -> reused.truncate(other.length + 1));
                assertThrows(IllegalArgumentException.class, () -> reused.truncate(-1));
                reused.truncate(0);
                assertEquals(0, reused.position());
            }
        }
    }

    /** The check of {@link #bytesGrowWithTheCapacity} on {@code model}'s pools from {@code open}. */
    public static void bytesGrowWithCapacity(GlmModel model, IntFunction<SequencePool> open) {
        try (SequencePool small = open.apply(CAPACITY);
                SequencePool large = open.apply(2 * CAPACITY)) {
            long perPosition = (long) model.config().layers() * model.config().kvRowWidth() * 2;
            assertTrue(small.bytesPerSequence() >= CAPACITY * perPosition, small.bytesPerSequence() + " bytes");
            assertTrue(
                    large.bytesPerSequence() - small.bytesPerSequence() >= CAPACITY * perPosition,
                    small.bytesPerSequence() + " and " + large.bytesPerSequence() + " bytes");
        }
    }
}
