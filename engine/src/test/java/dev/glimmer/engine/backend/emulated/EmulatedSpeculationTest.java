package dev.glimmer.engine.backend.emulated;

import static dev.glimmer.engine.backend.SequencePool.Readout.LOGITS;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.commandlist.CommandListPool;
import dev.glimmer.engine.backend.cpu.CpuSequencePool;
import dev.glimmer.engine.backend.cpu.FloatActivationBackend;
import dev.glimmer.engine.generate.Drafting;
import dev.glimmer.engine.generate.GenerationRequest;
import dev.glimmer.engine.generate.GenerationResult;
import dev.glimmer.engine.generate.Generator;
import dev.glimmer.engine.generate.TextDecoder;
import dev.glimmer.engine.generate.Vocabulary;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import dev.glimmer.engine.sampling.SamplingParams;
import dev.glimmer.engine.synth.ModelSynthesizer;
import dev.glimmer.engine.synth.SynthModel;
import dev.glimmer.engine.synth.SynthPreset;
import dev.glimmer.engine.synth.SynthWeightType;
import dev.glimmer.kernels.emulator.FiberOrder;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Speculative decoding through the GPU command lists, on the emulator, with the tiny synthetic Q4_0 model that has a
 * NextN block: the draft list drafts what the engine's NextN block drafts (float activations) (its KV rows filled by the prompt list, the
 * decode list and the verification's batch list as the CPU fills them, its input the trunk output each sequence keeps
 * on the device), the verification's rows are the trunk's (1e-3 of the logit range, as the decode step's), and greedy
 * generation with drafts gives the tokens of generation without them, whatever the drafts are.
 */
public class EmulatedSpeculationTest {
    private static final int CONTEXT = 64;
    private static final int GENERATED = 10;
    private static final double TOLERANCE = 1e-3;

    @TempDir
    static Path dir;

    private static GlmModel model;
    private static int[] prompt;

    /** A pool of one sequence of {@code capacity} positions of the model that drafts up to {@code drafts} tokens. */
    @FunctionalInterface
    public interface Pools {
        SequencePool pool(int drafts, int capacity);
    }

    /** The tiny synthetic Q4_0 model with a NextN block, written into {@code dir}. */
    public static GlmModel tinyModelWithTheBlock(Path dir) throws Exception {
        Path file = dir.resolve("tiny-mtp-q4_0.gguf");
        ModelSynthesizer.write(SynthModel.of(SynthPreset.TINY, SynthWeightType.Q4_0, 5, true), file, (w, t) -> {});
        return GlmModel.open(file);
    }

    private static Pools emulator() {
        return (drafts, capacity) -> EmulatorRunner.pool(model, 1, capacity, drafts);
    }

    @BeforeAll
    static void synthesize() throws Exception {
        model = tinyModelWithTheBlock(dir);
        prompt = prompt();
    }

    private static int[] prompt() {
        Random random = new Random(3);
        int[] tokens = new int[13];
        for (int i = 0; i < tokens.length; i++) {
            tokens[i] = random.nextInt(900);
        }
        return tokens;
    }

    @AfterAll
    static void close() {
        model.close();
    }

    @Test
    void theDraftsAreTheCpusAndTheVerifiedRowsTheTrunks() {
        theDraftsAreTheEnginesAndTheVerifiedRowsTheTrunks(model, emulator());
    }

    @Test
    void greedyTokensAreThoseOfDecodingWithoutDrafts() {
        greedyTokensAreThoseOfDecodingWithoutDrafts(model, emulator());
    }

    /** The drafts and the verification's rows of {@code pools} against the engine's forward pass in float. */
    public static void theDraftsAreTheEnginesAndTheVerifiedRowsTheTrunks(GlmModel model, Pools pools) {
        EmulatedSpeculationTest.model = model;
        prompt = prompt();
        // the reference the decode tests use: the engine's forward pass in float activations over a cache of halves
        try (CpuSequencePool cpu =
                        new CpuSequencePool(model, new FloatActivationBackend(), 1, CONTEXT, KvCacheType.GPU, 8, 1);
                SequencePool gpu = pools.pool(1, CONTEXT);
                SequencePool.Sequence c = cpu.open();
                SequencePool.Sequence g = gpu.open()) {
            assertEquals(1, gpu.maxDrafts());
            cpu.prompt(c, prompt, 0, prompt.length, LOGITS);
            gpu.prompt(g, prompt, 0, prompt.length, LOGITS);
            int agreed = 0;
            int rounds = 6;
            int token = 17;
            for (int round = 0; round < rounds; round++) {
                if (round == 2) {
                    // a plain decode step between: the decode list fills the block's row of its position
                    assertClose(step(cpu, c, 23), step(gpu, g, 23), "the plain step");
                }
                SequencePool.Speculation x = cpu.speculate(c, token, 1, LOGITS, SequencePool.DraftFilter.NONE);
                int[] fed = new int[2];
                SequencePool.Speculation y = gpu.speculate(g, token, 1, LOGITS, (position, drafts) -> {
                    assertEquals(g.position() + 1, position);
                    fed[1] = drafts[0];
                    // verify the CPU's draft on both, so that the rows compare
                    drafts[0] = x.drafts()[0];
                });
                if (fed[1] == x.drafts()[0]) {
                    agreed++;
                }
                assertEquals(2, y.rows().length);
                for (int row = 0; row < 2; row++) {
                    assertClose(x.rows()[row].logits(), y.rows()[row].logits(), "round " + round + ", row " + row);
                }
                // keep one or both rows, as verification would; the next round overwrites the rest
                int keep = 1 + round % 2;
                c.truncate(c.position() - 2 + keep);
                g.truncate(g.position() - 2 + keep);
                token = 200 + round;
            }
            // the drafts are argmaxes of logits that differ by the GPU's rounding: near-ties may go either way
            assertTrue(agreed >= rounds - 1, agreed + " of " + rounds + " drafts were the CPU's");
        }
    }

    /** Greedy generation through {@code pools} with drafts (its own, all right, all wrong) and without. */
    public static void greedyTokensAreThoseOfDecodingWithoutDrafts(GlmModel model, Pools pools) {
        EmulatedSpeculationTest.model = model;
        prompt = prompt();
        GenerationResult plain = generate(pools, 0, SequencePool.DraftFilter.NONE);
        int[] reference = plain.tokens();
        assertEquals(GENERATED, reference.length);

        GenerationResult own = generate(pools, 1, SequencePool.DraftFilter.NONE);
        assertArrayEquals(reference, own.tokens(), "the drafter's own drafts");
        assertTrue(own.drafts().drafted() > 0);

        GenerationResult right = generate(pools, 1, towards(reference, 1));
        assertArrayEquals(reference, right.tokens(), "every draft right");
        // every draft accepted, one a step after the first pick, none past the token limit
        assertEquals(
                (GENERATED - 1) / 2, right.drafts().accepted(), right.drafts().toString());
        assertEquals(
                right.drafts().drafted(),
                right.drafts().accepted(),
                right.drafts().toString());

        GenerationResult wrong = generate(pools, 1, towards(reference, 0));
        assertArrayEquals(reference, wrong.tokens(), "every draft wrong");
        assertEquals(0, wrong.drafts().accepted());
    }

    @Test
    void aPoolDraftsOnlyWithTheBlockAndAtMostItsListsDrafts() throws Exception {
        try (GlmModel trunkOnly = GlmModel.open(Oracle.model("tiny-q4_0"))) {
            assertEquals(0, CommandListPool.drafts(trunkOnly, 1));
            try (CommandListPool plain = EmulatorRunner.pool(trunkOnly, 1, 16, 1)) {
                assertEquals(0, plain.maxDrafts());
            }
        }
        assertEquals(1, CommandListPool.drafts(model, 2));
        assertThrows(
                IllegalArgumentException.class,
                () -> new CommandListPool(model, new EmulatorRunner(model, FiberOrder.inOrder()), 1, 16, 8, 2));
        try (CommandListPool pool = EmulatorRunner.pool(model, 1, 16, 1);
                SequencePool.Sequence s = pool.open()) {
            pool.prompt(s, prompt, 0, prompt.length, LOGITS);
            // one position left: the token alone, no draft
            while (s.position() < 15) {
                pool.step(List.of(s), new int[] {1}, new SequencePool.Readout[] {LOGITS});
            }
            SequencePool.Speculation spec = pool.speculate(s, 1, 1, LOGITS, SequencePool.DraftFilter.NONE);
            assertEquals(0, spec.drafts().length);
            assertEquals(1, spec.rows().length);
            assertEquals(16, s.position());
        }
    }

    /** Token ids as text, no end of generation: every run goes to the token limit. */
    private static final Vocabulary NUMBERS = new Vocabulary() {
        @Override
        public boolean isEndOfGeneration(int token) {
            return false;
        }

        @Override
        public TextDecoder newDecoder() {
            return new TextDecoder() {
                @Override
                public String next(int id) {
                    return id + " ";
                }

                @Override
                public String finish() {
                    return "";
                }
            };
        }
    };

    private static GenerationResult generate(Pools pools, int drafts, SequencePool.DraftFilter filter) {
        try (SequencePool pool = pools.pool(drafts, CONTEXT);
                SequencePool.Sequence sequence = pool.open()) {
            Generator generator =
                    new Generator(pool, sequence, NUMBERS, model.vocabSize(), 8, drafts, filter, Drafting.Use.ALWAYS);
            return generator.generate(
                    new GenerationRequest(prompt, SamplingParams.greedy(), GENERATED, List.of(), false),
                    e -> {},
                    () -> false);
        }
    }

    /** Replaces each draft by the token greedy decoding puts there with probability {@code accept}, else a wrong one. */
    private static SequencePool.DraftFilter towards(int[] reference, double accept) {
        return SequencePool.DraftFilter.towards(reference, prompt.length, accept, new Random(1), model.vocabSize());
    }

    private static float[] step(SequencePool pool, SequencePool.Sequence s, int token) {
        return pool.step(List.of(s), new int[] {token}, new SequencePool.Readout[] {LOGITS})[0].logits();
    }

    private static void assertClose(float[] expected, float[] actual, String what) {
        float min = Float.MAX_VALUE;
        float max = -Float.MAX_VALUE;
        float worst = 0;
        for (int i = 0; i < expected.length; i++) {
            min = Math.min(min, expected[i]);
            max = Math.max(max, expected[i]);
            worst = Math.max(worst, Math.abs(expected[i] - actual[i]));
        }
        assertTrue(
                worst <= TOLERANCE * (max - min),
                what + ": largest difference " + worst + " of a logit range of " + (max - min));
    }
}
