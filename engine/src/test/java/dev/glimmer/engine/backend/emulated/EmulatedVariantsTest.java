package dev.glimmer.engine.backend.emulated;

import static dev.glimmer.engine.model.VariantModels.OTHER;
import static dev.glimmer.engine.model.VariantModels.P;
import static dev.glimmer.engine.model.VariantModels.TOKENS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.commandlist.CommandListPool;
import dev.glimmer.engine.backend.commandlist.DecodeModels;
import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.gguf.GgufValue;
import dev.glimmer.engine.gguf.GgufWriter.TensorSpec;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmConfig;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import dev.glimmer.engine.model.VariantModels;
import dev.glimmer.kernels.emulator.FiberOrder;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The emulated decode step on variants of the architecture (F32 weights, so the CPU backend's numerics
 * are the float ones): softmax gating, no selection bias, tied output, unnormalized scaled expert
 * weights, two dense blocks, two shared experts, an MTP block that is not run.
 */
class EmulatedVariantsTest {
    @TempDir
    Path dir;

    @Test
    void softmaxNoBiasTiedOutputUnnormalizedWeightsTwoSharedExperts() throws Exception {
        try (GlmModel model = write(
                "softmax",
                m -> {
                    m.remove(P + "expert_gating_func");
                    m.put(P + "expert_weights_scale", GgufValue.float32(2.5f));
                    m.put(P + "expert_weights_norm", GgufValue.bool(false));
                },
                t -> t.removeIf(
                        s -> s.name().endsWith("exp_probs_b.bias") || s.name().equals("output.weight")))) {
            assertEquals(GlmConfig.GatingFunction.SOFTMAX, model.config().gating());
            assertDecodeAgrees(model);
        }
    }

    @Test
    void mtpBlockIsNotRun() throws Exception {
        try (GlmModel model = write("mtp", m -> m.put(P + "nextn_predict_layers", GgufValue.uint32(1)), t -> {})) {
            assertEquals(3, model.config().layers());
            assertDecodeAgrees(model);
        }
    }

    @Test
    void mergedGateUpExpertsAreRefusedWithAMessage() throws Exception {
        try (GlmModel model = write("merged", m -> {}, t -> {
            List<TensorSpec> edited = new ArrayList<>();
            for (TensorSpec s : t) {
                if (s.name().endsWith("ffn_gate_exps.weight")) {
                    edited.add(new TensorSpec(
                            s.name().replace("ffn_gate_exps", "ffn_gate_up_exps"),
                            new long[] {OTHER.embd(), 2L * OTHER.ffExpert(), OTHER.experts()},
                            s.type()));
                } else if (!s.name().endsWith("ffn_up_exps.weight")) {
                    edited.add(s);
                }
            }
            t.clear();
            t.addAll(edited);
        })) {
            InvalidInputException e =
                    assertThrows(InvalidInputException.class, () -> DecodeModels.of(model.file(), model.config()));
            assertTrue(e.getMessage().contains("merged.gguf stores merged ffn_gate_up_exps tensors"), e.getMessage());
        }
    }

    private static void assertDecodeAgrees(GlmModel model) {
        try (KvCache cache = model.newCache(TOKENS.length, KvCacheType.GPU);
                CommandListPool pool = new CommandListPool(
                        model, new EmulatorRunner(model, FiberOrder.shuffled(3)), 1, TOKENS.length, 4);
                SequencePool.Sequence gpu = pool.open()) {
            GlmForward cpu = new GlmForward(model, new CpuBackend(), 1);
            float[] expected = null;
            for (int t : TOKENS) {
                expected = cpu.forward(cache, new int[] {t}, 0, 1, false).clone();
                SequencePool.Next got = pool.step(
                                List.of(gpu), new int[] {t}, new SequencePool.Readout[] {SequencePool.Readout.LOGITS})[
                        0];
                assertAgrees(expected, got.logits(), got.greedyToken(), "position " + gpu.position());
            }
            // the same tokens through the prompt command list (batches of 4, the last one partly used)
            gpu.truncate(0);
            SequencePool.Next got = pool.prompt(gpu, TOKENS, 0, TOKENS.length, SequencePool.Readout.LOGITS);
            assertAgrees(expected, got.logits(), got.greedyToken(), "prompt batches");
        }
    }

    private static void assertAgrees(float[] expected, float[] got, int greedy, String where) {
        float lo = Float.POSITIVE_INFINITY;
        float hi = Float.NEGATIVE_INFINITY;
        for (float v : expected) {
            lo = Math.min(lo, v);
            hi = Math.max(hi, v);
        }
        assertTrue(hi - lo > 0.05, "logits too flat to compare");
        float diff = Oracle.maxAbsDiff(got, 0, expected, expected.length);
        assertTrue(diff <= 1e-3 * (hi - lo), where + ": max |Δlogit| " + diff);
        assertEquals(Oracle.argmax(expected, 0, expected.length), greedy, where);
    }

    private GlmModel write(String name, Consumer<Map<String, GgufValue>> metadata, Consumer<List<TensorSpec>> tensors)
            throws Exception {
        return VariantModels.write(dir, name, metadata, tensors);
    }
}
