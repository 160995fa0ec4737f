package dev.glimmer.engine.model;

import static dev.glimmer.engine.model.VariantModels.OTHER;
import static dev.glimmer.engine.model.VariantModels.P;
import static dev.glimmer.engine.model.VariantModels.TOKENS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.gguf.GgufValue;
import dev.glimmer.engine.gguf.GgufWriter.TensorSpec;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.tensor.GgmlType;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The engine on files of this architecture other than the oracle's: other sizes, more leading dense
 * blocks, other expert counts and scales, no gating key, no selection bias, tied output, no q_lora,
 * merged gate/up experts, an MTP block. Each is compared with {@link ReferenceForward}, an independent
 * double-precision forward pass that itself matches llama.cpp on tiny-f32.
 */
class ArchitectureVariantsTest {
    @TempDir
    Path dir;

    @Test
    void theReferenceItselfMatchesLlamaCppOnTinyF32() throws Exception {
        try (GlmModel model = GlmModel.open(Oracle.model("tiny-f32"))) {
            Oracle.Case chat = Oracle.chatCase("tiny-f32");
            double[][] ref = new ReferenceForward(model.file(), model.config()).logits(chat.promptTokens());
            for (int p = 0; p < ref.length; p++) {
                for (int i = 0; i < ref[p].length; i++) {
                    assertEquals(chat.promptLogits()[p][i], ref[p][i], 1e-4, "position " + p + " logit " + i);
                }
            }
        }
    }

    @Test
    void softmaxWithoutGatingKeyNoBiasTiedOutputUnnormalizedScaledWeights() throws Exception {
        GlmModel model = VariantModels.write(
                dir,
                "softmax",
                m -> {
                    m.remove(P + "expert_gating_func");
                    m.put(P + "expert_weights_scale", GgufValue.float32(2.5f));
                    m.put(P + "expert_weights_norm", GgufValue.bool(false));
                },
                t -> t.removeIf(
                        s -> s.name().endsWith("exp_probs_b.bias") || s.name().equals("output.weight")));
        try (model) {
            GlmConfig c = model.config();
            assertEquals(GlmConfig.GatingFunction.SOFTMAX, c.gating());
            assertEquals(2, c.leadingDenseBlocks());
            assertEquals("token_embd.weight", model.weights().output().name());
            assertAgreesWithReference(model);
        }
    }

    @Test
    void noQLoraMergedGateUpExpertsAndAnMtpBlock() throws Exception {
        int heads = OTHER.heads();
        int kmla = OTHER.qkNope() + OTHER.qkRope();
        GlmModel model = VariantModels.write(
                dir,
                "lite-mtp",
                m -> {
                    m.remove(P + "attention.q_lora_rank");
                    m.put(P + "nextn_predict_layers", GgufValue.uint32(1));
                },
                t -> {
                    List<TensorSpec> edited = new ArrayList<>();
                    for (TensorSpec s : t) {
                        String n = s.name();
                        if (n.endsWith("attn_q_a.weight")) {
                            edited.add(new TensorSpec(
                                    n.replace("attn_q_a", "attn_q"),
                                    new long[] {OTHER.embd(), (long) heads * kmla},
                                    GgmlType.F32));
                        } else if (n.endsWith("ffn_gate_exps.weight")) {
                            edited.add(new TensorSpec(
                                    n.replace("ffn_gate_exps", "ffn_gate_up_exps"),
                                    new long[] {OTHER.embd(), 2L * OTHER.ffExpert(), OTHER.experts()},
                                    GgmlType.F32));
                        } else if (!n.endsWith("attn_q_a_norm.weight")
                                && !n.endsWith("attn_q_b.weight")
                                && !n.endsWith("ffn_up_exps.weight")) {
                            edited.add(s);
                        }
                    }
                    t.clear();
                    t.addAll(edited);
                });
        try (model) {
            assertEquals(3, model.config().layers(), "the fourth block is the MTP block");
            assertEquals(0, model.config().qLoraRank());
            assertAgreesWithReference(model);
        }
    }

    private static void assertAgreesWithReference(GlmModel model) {
        double[][] ref = new ReferenceForward(model.file(), model.config()).logits(TOKENS);
        int vocab = model.vocabSize();
        try (KvCache cache = model.newCache(64, KvCacheType.F32)) {
            float[] ours = new GlmForward(model, new CpuBackend(), 5).forward(cache, TOKENS, 0, TOKENS.length, true);
            double spread = 0;
            for (int p = 0; p < TOKENS.length; p++) {
                for (int i = 0; i < vocab; i++) {
                    spread = Math.max(spread, Math.abs(ref[p][i]));
                    assertEquals(ref[p][i], ours[p * vocab + i], 1e-5, "position " + p + " logit " + i);
                }
            }
            assertTrue(spread > 0.05, "logits too small to compare: " + spread);
        }
    }
}
