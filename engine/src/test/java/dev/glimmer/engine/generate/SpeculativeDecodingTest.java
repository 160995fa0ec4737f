package dev.glimmer.engine.generate;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.backend.cpu.CpuSequencePool;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.sampling.SamplingParams;
import dev.glimmer.engine.synth.ModelSynthesizer;
import dev.glimmer.engine.synth.SynthModel;
import dev.glimmer.engine.synth.SynthPreset;
import dev.glimmer.engine.synth.SynthWeightType;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Speculative decoding with the model's NextN block on the CPU, on the tiny synthetic model with that block: the
 * greedy tokens are those of decoding without drafts, whatever the drafts are (the drafter's own, all right, some
 * wrong), and a speculative step's rows, after their rollback, are what plain steps compute.
 */
class SpeculativeDecodingTest {
    private static final int CONTEXT = 256;
    private static final int GENERATED = 32;

    @TempDir
    static Path dir;

    /** The weights and KV cache of the conformance tests (F32), and of serving (Q4_0 through the native kernel, F16). */
    private record Setup(GlmModel model, KvCacheType cache) {
        @Override
        public String toString() {
            return model.weights().output().type() + " weights, " + cache + " cache";
        }
    }

    private static Setup f32;
    private static Setup q4;
    private static GlmModel model;
    private static KvCacheType cacheType;
    private static int[] prompt;

    @BeforeAll
    static void synthesize() throws Exception {
        f32 = new Setup(synthesize(SynthWeightType.F32), KvCacheType.F32);
        q4 = new Setup(synthesize(SynthWeightType.Q4_0), KvCacheType.F16);
        Random random = new Random(3);
        prompt = new int[21];
        for (int i = 0; i < prompt.length; i++) {
            prompt[i] = random.nextInt(900);
        }
    }

    private static GlmModel synthesize(SynthWeightType type) throws Exception {
        Path file = dir.resolve("tiny-mtp-" + type + ".gguf");
        ModelSynthesizer.write(SynthModel.of(SynthPreset.TINY, type, 5, true), file, (w, t) -> {});
        return GlmModel.open(file);
    }

    @AfterAll
    static void close() {
        f32.model().close();
        q4.model().close();
    }

    /** Runs the test body on {@code setup}: its model and cache type in {@link #model} and {@link #cacheType}. */
    private static void on(Setup setup, Runnable body) {
        model = setup.model();
        cacheType = setup.cache();
        body.run();
    }

    private static CpuSequencePool pool(int maxDrafts, int batch) {
        return new CpuSequencePool(model, new CpuBackend(), 1, CONTEXT, cacheType, batch, maxDrafts);
    }

    private static GenerationResult generate(int drafts, int batch, SequencePool.DraftFilter filter) {
        return generate(drafts, batch, filter, SamplingParams.greedy());
    }

    private static GenerationResult generate(
            int drafts, int batch, SequencePool.DraftFilter filter, SamplingParams sampling) {
        try (CpuSequencePool pool = pool(drafts, batch);
                SequencePool.Sequence sequence = pool.open()) {
            Generator generator = new Generator(
                    pool,
                    sequence,
                    new GeneratorTest.BracketVocabulary(java.util.Set.of()),
                    model.vocabSize(),
                    batch,
                    drafts,
                    filter,
                    Drafting.Use.ALWAYS);
            return generator.generate(
                    new GenerationRequest(prompt, sampling, GENERATED, List.of(), false), e -> {}, () -> false);
        }
    }

    /** Replaces each draft by the token greedy decoding puts there with probability {@code accept}, else a wrong one. */
    private static SequencePool.DraftFilter towards(int[] reference, double accept, long seed) {
        return SequencePool.DraftFilter.towards(reference, prompt.length, accept, new Random(seed), model.vocabSize());
    }

    @Test
    void greedyTokensAreThoseOfDecodingWithoutDrafts() {
        on(f32, () -> greedyTokensAreTheSame(1));
        on(f32, () -> greedyTokensAreTheSame(2));
        on(q4, () -> greedyTokensAreTheSame(2));
    }

    private static void greedyTokensAreTheSame(int drafts) {
        GenerationResult plain = generate(0, 8, SequencePool.DraftFilter.NONE);
        int[] reference = plain.tokens();
        assertEquals(GENERATED, reference.length);
        GenerationResult own = generate(drafts, 8, SequencePool.DraftFilter.NONE);
        assertArrayEquals(reference, own.tokens(), "the drafter's own drafts, " + drafts + " per step");
        assertEquals(plain.text(), own.text());
        assertTrue(own.drafts().drafted() > 0);

        GenerationResult right = generate(drafts, 8, towards(reference, 1, 1));
        assertArrayEquals(reference, right.tokens(), cacheType + ", every draft right, " + drafts + " per step");
        // Every draft is accepted: none is drafted past the token limit.
        assertEquals(
                right.drafts().drafted(),
                right.drafts().accepted(),
                right.drafts().toString());
        // Each step takes 1 + drafts tokens after the first pick, the last as many as the limit leaves (one: a plain
        // step, two with two drafts: one draft).
        int after = GENERATED - 1;
        int drafted = after / (1 + drafts) * drafts + Math.max(0, after % (1 + drafts) - 1);
        assertEquals(drafted, right.drafts().drafted(), right.drafts().toString());

        GenerationResult wrong = generate(drafts, 8, towards(reference, 0, 1));
        assertArrayEquals(reference, wrong.tokens(), "every draft wrong, " + drafts + " per step");
        assertEquals(0, wrong.drafts().accepted());

        GenerationResult some = generate(drafts, 8, towards(reference, 0.6, 2));
        assertArrayEquals(reference, some.tokens(), "60 % of the drafts right, " + drafts + " per step");
        double acceptance = some.drafts().acceptance();
        assertTrue(acceptance > 0.2 && acceptance < 0.9, "acceptance " + acceptance);
    }

    @Test
    void sampledTokensWithASeedAreThoseOfDecodingWithoutDrafts() {
        // Each pick draws as a plain step draws, one random number per pick in order: with a seed the tokens are the
        // same, drafts or not, right or wrong (and so distributed as without drafts).
        on(f32, () -> {
            SamplingParams sampling =
                    new SamplingParams(1.0f, 40, 0.95f, 0.02f, OptionalLong.of(7), 1.1f, 0f, 0f, 64, Map.of());
            int[] reference =
                    generate(0, 8, SequencePool.DraftFilter.NONE, sampling).tokens();
            assertEquals(GENERATED, reference.length);
            for (int drafts = 1; drafts <= 2; drafts++) {
                GenerationResult right = generate(drafts, 8, towards(reference, 1, 1), sampling);
                assertArrayEquals(reference, right.tokens(), "every draft right, " + drafts + " per step");
                assertEquals(right.drafts().drafted(), right.drafts().accepted());
                assertTrue(right.drafts().accepted() > 0);
                GenerationResult some = generate(drafts, 8, towards(reference, 0.5, 3), sampling);
                assertArrayEquals(reference, some.tokens(), "half the drafts right, " + drafts + " per step");
                GenerationResult own = generate(drafts, 8, SequencePool.DraftFilter.NONE, sampling);
                assertArrayEquals(reference, own.tokens(), "the drafter's own, " + drafts + " per step");
            }
        });
    }

    @Test
    void aSpeculativeStepsRowsAreThePlainStepsAndRejectedRowsAreOverwritten() {
        // Bit for bit: a row of a verification pass is computed as a lone decode step is, so greedy picks cannot
        // differ even on a near-tie.
        on(f32, SpeculativeDecodingTest::rowsArePlainSteps);
        on(q4, SpeculativeDecodingTest::rowsArePlainSteps);
    }

    private static void rowsArePlainSteps() {
        try (CpuSequencePool plain = pool(0, 8);
                CpuSequencePool drafting = pool(2, 8);
                SequencePool.Sequence p = plain.open();
                SequencePool.Sequence d = drafting.open()) {
            plain.prompt(p, prompt, 0, prompt.length, SequencePool.Readout.LOGITS);
            drafting.prompt(d, prompt, 0, prompt.length, SequencePool.Readout.LOGITS);
            int token = 17;
            for (int round = 0; round < 6; round++) {
                int forced = 100 + round;
                SequencePool.Speculation s = drafting.speculate(
                        d, token, 2, SequencePool.Readout.LOGITS, (position, drafts) -> drafts[1] = forced);
                assertEquals(2, s.drafts().length);
                assertEquals(forced, s.drafts()[1]);
                int[] fed = {token, s.drafts()[0], s.drafts()[1]};
                int before = p.position();
                for (int row = 0; row < 3; row++) {
                    float[] expected = plain
                            .step(List.of(p), new int[] {fed[row]}, new SequencePool.Readout[] {
                                SequencePool.Readout.LOGITS
                            })[0]
                            .logits();
                    assertSame(expected, s.rows()[row].logits(), "round " + round + ", row " + row);
                }
                // Keep 1 + (round % 3) rows, as verification would, in both; the next round overwrites the rest.
                int keep = 1 + round % 3;
                p.truncate(before + keep);
                d.truncate(before + keep);
                assertEquals(p.position(), d.position());
                token = 200 + round;
            }
            float[] last =
                    plain.step(List.of(p), new int[] {5}, new SequencePool.Readout[] {SequencePool.Readout.LOGITS})[0]
                            .logits();
            float[] mine = drafting
                    .step(List.of(d), new int[] {5}, new SequencePool.Readout[] {SequencePool.Readout.LOGITS})[0]
                    .logits();
            assertSame(last, mine, "a plain step after the rollbacks");
        }
    }

    @Test
    void theDraftsDoNotDependOnHowThePromptWasCut() {
        on(f32, SpeculativeDecodingTest::draftsDoNotDependOnChunks);
        on(q4, SpeculativeDecodingTest::draftsDoNotDependOnChunks);
    }

    private static void draftsDoNotDependOnChunks() {
        // The NextN block's KV rows of the prompt come from its chunks (and the trunk output kept across them): cut
        // in chunks of 3 they must be those of one chunk, so the drafts and their logits are the same.
        try (CpuSequencePool whole = pool(2, 64);
                CpuSequencePool cut = pool(2, 3);
                SequencePool.Sequence a = whole.open();
                SequencePool.Sequence b = cut.open()) {
            whole.prompt(a, prompt, 0, prompt.length, SequencePool.Readout.LOGITS);
            for (int done = 0; done < prompt.length; done += 5) {
                cut.prompt(b, prompt, done, Math.min(5, prompt.length - done), SequencePool.Readout.LOGITS);
            }
            SequencePool.Speculation x = whole.speculate(a, 42, 2, SequencePool.Readout.LOGITS, (p, ds) -> {});
            SequencePool.Speculation y = cut.speculate(b, 42, 2, SequencePool.Readout.LOGITS, (p, ds) -> {});
            assertArrayEquals(x.drafts(), y.drafts());
            for (int row = 0; row < 3; row++) {
                assertSame(x.rows()[row].logits(), y.rows()[row].logits(), "row " + row);
            }
        }
    }

    @Test
    void aPoolDraftsOnlyForAModelWithTheBlockAndNotPastTheContext() throws Exception {
        GlmModel model = f32.model();
        assertNotNull(model.weights().nextn());
        try (GlmModel trunkOnly = GlmModel.open(Path.of("src/test/resources/oracle/tiny-f32.gguf"))) {
            assertThrows(
                    IllegalArgumentException.class,
                    () -> new CpuSequencePool(trunkOnly, new CpuBackend(), 1, 64, KvCacheType.F32, 8, 1));
            try (CpuSequencePool plain = new CpuSequencePool(trunkOnly, new CpuBackend(), 1, 64, KvCacheType.F32, 8)) {
                assertEquals(0, plain.maxDrafts());
            }
        }
        try (CpuSequencePool pool = new CpuSequencePool(model, new CpuBackend(), 1, 8, KvCacheType.F32, 4, 2);
                SequencePool.Sequence s = pool.open()) {
            pool.prompt(s, prompt, 0, 6, SequencePool.Readout.LOGITS);
            // Two positions left: the token and one draft.
            SequencePool.Speculation spec = pool.speculate(s, 1, 2, SequencePool.Readout.LOGITS, (p, d) -> {});
            assertEquals(1, spec.drafts().length);
            assertEquals(2, spec.rows().length);
            assertEquals(8, s.position());
        }
    }

    private static void assertSame(float[] expected, float[] actual, String what) {
        assertArrayEquals(expected, actual, model.weights().output().type() + ", " + cacheType + ": " + what);
    }
}
