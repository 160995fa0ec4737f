package dev.glimmer.engine.backend.emulated;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.commandlist.CommandListPool;
import dev.glimmer.engine.backend.cpu.FloatActivationBackend;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import dev.glimmer.engine.synth.ModelSynthesizer;
import dev.glimmer.engine.synth.SynthModel;
import dev.glimmer.engine.synth.SynthPreset;
import dev.glimmer.engine.synth.SynthWeightType;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.emulator.FiberOrder;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The GPU command lists on the emulator against the engine's forward pass (float activations and an F16 KV cache, as
 * the kernels compute: {@link KvCacheType#GPU}) on the oracle models: the
 * chat prompt fed token by token through the decode step (or all but its last token through the prompt
 * command list, in batches of {@link #BATCH}), then a 32-token greedy run; after the prompt batches and
 * at every step the logits agree within 1e-3 of the logit range and the argmax dispatch picks the same token.
 */
class EmulatedDecodeTest {

    private static final int GREEDY = 32;
    private static final double TOLERANCE = 1e-3;
    /**
     * Tokens of a prompt batch here: the chat prompts (23 tokens before the last) span three batches, the last
     * one partly used, and each batch fills part of one tile of {@link Geometry#MM_TOKENS} tokens (MatMatKernelTest
     * and PromptExpertsKernelTest take batches of several tiles).
     */
    private static final int BATCH = 10;

    /** The greedy tokens of the run, after checking every step against the float reference. */
    private static int[] run(String name, FiberOrder order, boolean batchedPrompt) throws IOException {
        try (GlmModel model = GlmModel.open(Oracle.model(name))) {
            int[] prompt = Oracle.chatCase(name).promptTokens();
            int context = prompt.length + GREEDY;
            KvCache cache = model.newCache(context, KvCacheType.GPU);
            GlmForward reference = new GlmForward(model, new FloatActivationBackend(), 1);
            int[] greedy = new int[GREEDY];
            try (CommandListPool pool =
                            new CommandListPool(model, new EmulatorRunner(model, order), 1, context, BATCH);
                    SequencePool.Sequence gpu = pool.open()) {
                int first = 0;
                if (batchedPrompt) {
                    int n = prompt.length - 1;
                    assertTrue(
                            n > BATCH && n % BATCH != 0, "the prompt must span batches and end in a partial one: " + n);
                    float[] expected = reference.forward(cache, prompt, 0, n, false);
                    SequencePool.Next got = pool.prompt(gpu, prompt, 0, n, SequencePool.Readout.LOGITS);
                    Oracle.assertGpuLogits(
                            name + " prompt batches", expected, got.logits(), got.greedyToken(), TOLERANCE);
                    first = n;
                }
                int token = prompt[first];
                for (int step = first; step < prompt.length + GREEDY - 1; step++) {
                    float[] expected = reference.forward(cache, new int[] {token}, 0, 1, false);
                    SequencePool.Next got = pool.step(List.of(gpu), new int[] {token}, new SequencePool.Readout[] {
                        SequencePool.Readout.LOGITS
                    })[0];
                    int next = Oracle.assertGpuLogits(
                            name + " step " + step, expected, got.logits(), got.greedyToken(), TOLERANCE);
                    if (step >= prompt.length - 1) {
                        greedy[step - prompt.length + 1] = next;
                    }
                    token = step + 1 < prompt.length ? prompt[step + 1] : next;
                }
            }
            return greedy;
        }
    }

    /** Asserts the logits and the greedy token; returns the expected greedy token. */

    /**
     * A model wide enough (embedding, q_lora and heads x v_head of 512, Q4_0) that the prompt list splits q_a, kv_a
     * and attn_output into column parts and reads every Q4_0 row through the tiles' 16-byte loads (the oracle models
     * are too narrow for either): a prompt of most of a batch against the forward pass. (With
     * 300 tokens, whose last batch splits the attention's keys into parts, it passes too but takes 5 minutes here;
     * FlashAttentionKernelTest covers the parts.)
     */
    @Test
    void widePromptMatchesTheForwardPass(@TempDir Path dir) throws IOException {
        SynthPreset wide = new SynthPreset(
                "wide", 2, 1, 512, 512, 256, 4, 512, 128, 64, 32, 128, 8, 2, 1, 4096, 2048, 1984, 1038, false);
        int batch = Geometry.MM_TOKENS;
        int n = batch - 19;
        assertTrue(Geometry.mmParts(batch, wide.qLoraRank(), wide.embd()) > 1, "the model must take the column parts");
        Path file = dir.resolve("wide-q4_0.gguf");
        ModelSynthesizer.write(SynthModel.of(wide, SynthWeightType.Q4_0, 3), file, (written, total) -> {});
        try (GlmModel model = GlmModel.open(file)) {
            int[] prompt = new Random(11).ints(n, 0, model.vocabSize()).toArray();
            KvCache cache = model.newCache(n, KvCacheType.GPU);
            GlmForward reference = new GlmForward(model, new FloatActivationBackend(), 64);
            try (CommandListPool pool =
                            new CommandListPool(model, new EmulatorRunner(model, FiberOrder.inOrder()), 1, n, batch);
                    SequencePool.Sequence gpu = pool.open()) {
                float[] expected = reference.forward(cache, prompt, 0, n, false);
                SequencePool.Next got = pool.prompt(gpu, prompt, 0, n, SequencePool.Readout.LOGITS);
                Oracle.assertGpuLogits("wide prompt", expected, got.logits(), got.greedyToken(), TOLERANCE);
            }
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"tiny-q8_0", "tiny-q4_0", "small-q4_k_m"})
    void decodeStepMatchesTheForwardPass(String name) throws IOException {
        run(name, FiberOrder.inOrder(), false);
    }

    @ParameterizedTest
    @ValueSource(strings = {"tiny-q4_0", "small-q4_k_m"})
    void promptBatchesMatchTheForwardPass(String name) throws IOException {
        run(name, FiberOrder.inOrder(), true);
    }

    /**
     * On the F32 model (here with the fibers shuffled) the float path is llama.cpp's: the greedy run is the
     * oracle's, after the prompt token by token and after it in batches.
     */
    @Test
    void tinyF32GreedyRunIsLlamaCpps() throws IOException {
        int[] expected = Oracle.chatCase("tiny-f32").greedyTokens();
        assertArrayEquals(expected, run("tiny-f32", FiberOrder.shuffled(5), false));
        assertArrayEquals(expected, run("tiny-f32", FiberOrder.shuffled(6), true));
    }
}
