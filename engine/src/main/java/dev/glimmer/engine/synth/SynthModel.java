package dev.glimmer.engine.synth;

import dev.glimmer.engine.gguf.GgufValue;
import dev.glimmer.engine.gguf.GgufValue.GgufArray;
import dev.glimmer.engine.gguf.GgufValueType;
import dev.glimmer.engine.gguf.GgufWriter.TensorSpec;
import dev.glimmer.engine.model.ModelFacts;
import dev.glimmer.engine.tensor.GgmlType;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The header of a synthetic GLM-4.7-Flash-architecture GGUF: the metadata keys (with the value types
 * and in the order of the oracle files) and the tensor list (names, shapes, order and types as in
 * docs/MODEL.md §3 and the oracle files), with the seed its vocabulary and weights are drawn from.
 */
public record SynthModel(
        SynthPreset preset,
        SynthWeightType weightType,
        long seed,
        boolean nextn,
        Map<String, GgufValue> metadata,
        List<TensorSpec> tensors) {

    private static final String ARCH = "deepseek2";

    /** A model of the preset's trunk alone (the layout of the oracle files). */
    public static SynthModel of(SynthPreset preset, SynthWeightType weightType, long seed) {
        return of(preset, weightType, seed, false);
    }

    /**
     * @param nextn whether the file also carries the multi-token-prediction (NextN) block after the trunk, as newer
     *              GLM-4.7-Flash conversions do: {@code block_count} one more, {@code nextn_predict_layers} 1, and
     *              {@code blk.<layers>.*}, a MoE block with the {@code nextn.*} tensors (docs/MODEL.md §4b)
     */
    public static SynthModel of(SynthPreset preset, SynthWeightType weightType, long seed, boolean nextn) {
        return new SynthModel(
                preset,
                weightType,
                seed,
                nextn,
                metadata(preset, weightType, SynthVocab.build(preset, seed), nextn),
                tensors(preset, weightType, nextn));
    }

    private static Map<String, GgufValue> metadata(SynthPreset p, SynthWeightType w, SynthVocab vocab, boolean nextn) {
        Map<String, GgufValue> m = new LinkedHashMap<>();
        m.put("general.architecture", GgufValue.of(ARCH));
        m.put("general.type", GgufValue.of("model"));
        m.put("general.name", GgufValue.of(p.modelName()));
        u32(m, "block_count", p.layers() + (nextn ? 1 : 0));
        if (nextn) {
            u32(m, "nextn_predict_layers", 1);
        }
        u32(m, "context_length", p.contextLength());
        u32(m, "embedding_length", p.embd());
        u32(m, "feed_forward_length", p.ff());
        u32(m, "attention.head_count", p.heads());
        // MLA is stored as one shared latent KV head (docs/MODEL.md §2).
        u32(m, "attention.head_count_kv", 1);
        m.put(ARCH + ".rope.freq_base", GgufValue.float32(1_000_000f));
        m.put(ARCH + ".attention.layer_norm_rms_epsilon", GgufValue.float32(1e-5f));
        u32(m, "expert_used_count", p.expertsUsed());
        u32(m, "expert_group_count", 1);
        u32(m, "expert_group_used_count", 1);
        // 2 = sigmoid routing; written explicitly, as the oracle files do.
        u32(m, "expert_gating_func", 2);
        m.put("general.file_type", GgufValue.uint32(w.fileType));
        u32(m, "leading_dense_block_count", p.denseLead());
        u32(m, "vocab_size", p.vocabSize());
        u32(m, "attention.q_lora_rank", p.qLoraRank());
        u32(m, "attention.kv_lora_rank", p.kvLoraRank());
        u32(m, "attention.key_length", p.kvLoraRank() + p.qkRope());
        u32(m, "attention.value_length", p.kvLoraRank());
        u32(m, "attention.key_length_mla", p.qkNope() + p.qkRope());
        u32(m, "attention.value_length_mla", p.vHead());
        u32(m, "expert_feed_forward_length", p.ffExpert());
        u32(m, "expert_count", p.experts());
        u32(m, "expert_shared_count", p.expertsShared());
        m.put(ARCH + ".expert_weights_scale", GgufValue.float32(1.8f));
        m.put(ARCH + ".expert_weights_norm", GgufValue.bool(true));
        u32(m, "rope.dimension_count", p.qkRope());
        m.put("general.quantization_version", GgufValue.uint32(2));
        m.put("tokenizer.ggml.model", GgufValue.of("gpt2"));
        m.put("tokenizer.ggml.pre", GgufValue.of("glm4"));
        m.put("tokenizer.ggml.tokens", GgufValue.array(GgufArray.strings(vocab.tokens())));
        m.put("tokenizer.ggml.token_type", GgufValue.array(GgufArray.ints(GgufValueType.INT32, vocab.tokenTypes())));
        m.put("tokenizer.ggml.merges", GgufValue.array(GgufArray.strings(vocab.merges())));
        int base = p.specialBase();
        m.put("tokenizer.ggml.eos_token_id", GgufValue.uint32(base + SynthVocab.ENDOFTEXT));
        m.put("tokenizer.ggml.padding_token_id", GgufValue.uint32(base + SynthVocab.ENDOFTEXT));
        m.put("tokenizer.ggml.bos_token_id", GgufValue.uint32(base + SynthVocab.GMASK));
        m.put("tokenizer.ggml.eot_token_id", GgufValue.uint32(base + SynthVocab.USER));
        m.put("tokenizer.ggml.unknown_token_id", GgufValue.uint32(base + SynthVocab.ENDOFTEXT));
        m.put("tokenizer.ggml.eom_token_id", GgufValue.uint32(base + SynthVocab.OBSERVATION));
        m.put("tokenizer.chat_template", GgufValue.of(ModelFacts.bundledChatTemplate()));
        return m;
    }

    private static void u32(Map<String, GgufValue> m, String key, long value) {
        m.put(ARCH + "." + key, GgufValue.uint32(value));
    }

    /** The tensors of a model of preset {@code p} with {@code w} weights, in file order. */
    static List<TensorSpec> tensors(SynthPreset p, SynthWeightType w, boolean nextn) {
        long e = p.embd();
        long v = p.vocabSize();
        long h = p.heads();
        long ffShared = (long) p.ffExpert() * p.expertsShared();
        List<TensorSpec> t = new ArrayList<>();
        Tensors add = new Tensors(t, w, p);
        add.matrix("token_embd.weight", e, v);
        int blocks = p.layers() + (nextn ? 1 : 0);
        for (int i = 0; i < blocks; i++) {
            String b = "blk." + i + ".";
            add.f32(b + "attn_norm.weight", e);
            add.f32(b + "attn_q_a_norm.weight", p.qLoraRank());
            add.f32(b + "attn_kv_a_norm.weight", p.kvLoraRank());
            add.matrix(b + "attn_q_a.weight", e, p.qLoraRank());
            add.matrix(b + "attn_q_b.weight", p.qLoraRank(), h * (p.qkNope() + p.qkRope()));
            add.matrix(b + "attn_kv_a_mqa.weight", e, p.kvLoraRank() + p.qkRope());
            add.matrix(b + "attn_k_b.weight", p.qkNope(), p.kvLoraRank(), h);
            add.matrix(b + "attn_v_b.weight", p.kvLoraRank(), p.vHead(), h);
            add.matrix(b + "attn_output.weight", h * p.vHead(), e);
            add.f32(b + "ffn_norm.weight", e);
            if (i < p.denseLead()) {
                add.matrix(b + "ffn_gate.weight", e, p.ff());
                add.matrix(b + "ffn_up.weight", e, p.ff());
                add.matrix(b + "ffn_down.weight", p.ff(), e);
            } else {
                add.f32(b + "ffn_gate_inp.weight", e, p.experts());
                add.f32(b + "exp_probs_b.bias", p.experts());
                add.matrix(b + "ffn_gate_exps.weight", e, p.ffExpert(), p.experts());
                add.matrix(b + "ffn_up_exps.weight", e, p.ffExpert(), p.experts());
                add.matrix(b + "ffn_down_exps.weight", p.ffExpert(), e, p.experts());
                add.matrix(b + "ffn_gate_shexp.weight", e, ffShared);
                add.matrix(b + "ffn_up_shexp.weight", e, ffShared);
                add.matrix(b + "ffn_down_shexp.weight", ffShared, e);
            }
            if (i == p.layers()) {
                // The NextN block's own tensors, as llama.cpp's converter names them (the embedding and the head
                // are the trunk's: the optional nextn.embed_tokens and nextn.shared_head_head are not written).
                add.matrix(b + "nextn.eh_proj.weight", 2 * e, e);
                add.f32(b + "nextn.enorm.weight", e);
                add.f32(b + "nextn.hnorm.weight", e);
                add.f32(b + "nextn.shared_head_norm.weight", e);
            }
        }
        add.f32("output_norm.weight", e);
        add.matrix("output.weight", e, v);
        return t;
    }

    /** Appends tensors: weight matrices in the chosen type, the rest (norms, router, bias) in F32. */
    private record Tensors(List<TensorSpec> list, SynthWeightType weightType, SynthPreset preset) {
        void matrix(String name, long... shape) {
            list.add(new TensorSpec(
                    name, shape, weightType.matrixType(name, shape[0], preset.layers(), preset.experts())));
        }

        void f32(String name, long... shape) {
            list.add(new TensorSpec(name, shape, GgmlType.F32));
        }
    }

    /**
     * How a tensor's values are drawn: norm weights around 1 (as trained RMS-norm gains are), every
     * other tensor (matrices, router, expert bias) around 0 with standard deviation 0.02.
     */
    static float mean(String tensorName) {
        return tensorName.endsWith("norm.weight") ? 1f : 0f;
    }

    static final float STDDEV = 0.02f;
}
