package dev.glimmer.engine.model;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.gguf.GgufMetadata;
import java.util.OptionalLong;

/**
 * The hyper-parameters of a GLM-4.7-Flash-architecture model (llama.cpp arch {@code deepseek2} with
 * MLA attention), read from the {@code deepseek2.*} metadata keys of docs/MODEL.md §2.
 *
 * @param layers             trunk layers: {@code block_count - nextn_predict_layers} (an MTP block is not run)
 * @param nextnLayers        {@code nextn_predict_layers} (0 when absent)
 * @param contextLength      {@code context_length}: the longest context the model was trained for
 * @param embedding          {@code embedding_length} (E)
 * @param denseFfn           {@code feed_forward_length}: width of the leading dense FFN
 * @param heads              {@code attention.head_count} (H)
 * @param ropeBase           {@code rope.freq_base}
 * @param rmsEps             {@code attention.layer_norm_rms_epsilon}
 * @param expertsUsed        {@code expert_used_count}: routed experts per token
 * @param leadingDenseBlocks {@code leading_dense_block_count}: layers with a dense FFN instead of MoE
 * @param vocabSize          {@code vocab_size}, else the tokenizer's token count (only used by the gating rule)
 * @param qLoraRank          {@code attention.q_lora_rank}; 0 when the model projects Q directly ("lite" models)
 * @param kvLoraRank         {@code attention.kv_lora_rank}: width of the latent KV (512 in the real model)
 * @param keyLengthMla       {@code attention.key_length_mla}: nope + rope dims of one query head
 * @param valueLengthMla     {@code attention.value_length_mla}: value dims of one head
 * @param ropeDims           {@code rope.dimension_count}: rotated dims of a query head and of the shared key
 * @param expertFfn          {@code expert_feed_forward_length}: width of one expert
 * @param experts            {@code expert_count}
 * @param sharedExperts      {@code expert_shared_count}
 * @param expertWeightsScale {@code expert_weights_scale} (1 when absent)
 * @param expertWeightsNorm  {@code expert_weights_norm} (false when absent)
 * @param gating             {@code expert_gating_func}, or llama.cpp's rule when absent
 */
public record GlmConfig(
        int layers,
        int nextnLayers,
        int contextLength,
        int embedding,
        int denseFfn,
        int heads,
        float ropeBase,
        float rmsEps,
        int expertsUsed,
        int leadingDenseBlocks,
        long vocabSize,
        int qLoraRank,
        int kvLoraRank,
        int keyLengthMla,
        int valueLengthMla,
        int ropeDims,
        int expertFfn,
        int experts,
        int sharedExperts,
        float expertWeightsScale,
        boolean expertWeightsNorm,
        GatingFunction gating) {

    public static final String ARCH = "deepseek2";
    static final String P = ARCH + ".";

    /** How router logits become expert probabilities (llama.cpp's {@code llama_expert_gating_func_type}). */
    public enum GatingFunction {
        SOFTMAX(1),
        SIGMOID(2);

        final int id;

        GatingFunction(int id) {
            this.id = id;
        }
    }

    /** Width of one row of the latent KV cache: the compressed KV plus the shared RoPE key (576 in the real model). */
    public int kvRowWidth() {
        return kvLoraRank + ropeDims;
    }

    /** The non-rotated part of a query head (192 in the real model). */
    public int nopeDims() {
        return keyLengthMla - ropeDims;
    }

    /** Softmax scale of the attention scores: 1/sqrt(key_length_mla), as llama.cpp (no YaRN mscale here). */
    public float kqScale() {
        return (float) (1.0 / Math.sqrt(keyLengthMla));
    }

    public boolean isDense(int layer) {
        return layer < leadingDenseBlocks;
    }

    /** Reads and checks the config of {@code file}; refuses files that are not MLA deepseek2 models. */
    public static GlmConfig from(GgufFile file) {
        return from(file.metadata(), String.valueOf(file.path().getFileName()));
    }

    /** Reads and checks the config in {@code md}; {@code fileName} is for messages. */
    public static GlmConfig from(GgufMetadata md, String fileName) {
        String arch = md.optString("general.architecture").orElse(null);
        String name = md.optString("general.name").map(n -> " (\"" + n + "\")").orElse("");
        if (arch == null) {
            throw new InvalidInputException(
                    fileName + " has no general.architecture key: not a model file Glimmer can run");
        }
        if (!arch.equals(ARCH)) {
            throw new InvalidInputException(fileName + " is a " + arch + " model" + name
                    + "; Glimmer runs GLM-4.7-Flash files (architecture deepseek2)");
        }
        if (md.optInteger(P + "attention.key_length_mla").orElse(0) == 0
                || md.optInteger(P + "attention.value_length_mla").orElse(0) == 0
                || !md.has(P + "attention.kv_lora_rank")) {
            throw new InvalidInputException(fileName + " is a deepseek2 model" + name
                    + " without MLA keys (attention.key_length_mla, value_length_mla, kv_lora_rank): a legacy conversion"
                    + " Glimmer cannot run; convert it again with a current llama.cpp");
        }
        if (md.optString(P + "rope.scaling.type").map(t -> t.equals("yarn")).orElse(false)
                && md.optNumber(P + "rope.scaling.factor").orElse(1) != 1) {
            throw new InvalidInputException(fileName + " uses YaRN rope scaling (" + P + "rope.scaling.factor = "
                    + md.number(P + "rope.scaling.factor") + "), which Glimmer does not implement");
        }
        if (md.optInteger(P + "expert_group_count").orElse(1) > 1) {
            throw new InvalidInputException(
                    fileName + " uses group-limited expert routing (" + P + "expert_group_count = "
                            + md.integer(P + "expert_group_count") + "), which Glimmer does not implement");
        }

        int blockCount = intKey(md, "block_count");
        int nextn = (int) md.optInteger(P + "nextn_predict_layers").orElse(0);
        if (nextn < 0 || nextn >= blockCount) {
            throw new InvalidInputException(fileName + ": " + P + "nextn_predict_layers = " + nextn
                    + " must be smaller than " + P + "block_count = " + blockCount);
        }
        int layers = blockCount - nextn;
        int kvLoraRank = intKey(md, "attention.kv_lora_rank");
        int ropeDims = intKey(md, "rope.dimension_count");
        int keyLengthMla = intKey(md, "attention.key_length_mla");
        int valueLengthMla = intKey(md, "attention.value_length_mla");
        // The latent cache row is kv_lora_rank + rope dims (key_length), its value part kv_lora_rank (value_length).
        int keyLength = intKey(md, "attention.key_length");
        int valueLength = intKey(md, "attention.value_length");
        if (keyLength != kvLoraRank + ropeDims) {
            throw new InvalidInputException(fileName + ": " + P + "attention.key_length = " + keyLength + " but " + P
                    + "attention.kv_lora_rank + " + P + "rope.dimension_count = " + (kvLoraRank + ropeDims));
        }
        if (valueLength != kvLoraRank) {
            throw new InvalidInputException(fileName + ": " + P + "attention.value_length = " + valueLength + " but "
                    + P + "attention.kv_lora_rank = " + kvLoraRank);
        }
        if (ropeDims % 2 != 0 || ropeDims >= keyLengthMla) {
            throw new InvalidInputException(fileName + ": " + P + "rope.dimension_count = " + ropeDims
                    + " must be even and smaller than " + P + "attention.key_length_mla = " + keyLengthMla);
        }
        int experts = intKey(md, "expert_count");
        int expertsUsed = intKey(md, "expert_used_count");
        if (expertsUsed > experts) {
            throw new InvalidInputException(fileName + ": " + P + "expert_used_count = " + expertsUsed
                    + " is more than " + P + "expert_count = " + experts);
        }
        int leadingDense = (int) md.optInteger(P + "leading_dense_block_count").orElse(0);
        if (leadingDense < 0 || leadingDense > layers) {
            throw new InvalidInputException(
                    fileName + ": " + P + "leading_dense_block_count = " + leadingDense + " is outside 0.." + layers);
        }
        long vocabSize = md.optInteger(P + "vocab_size")
                .orElseGet(() -> md.has("tokenizer.ggml.tokens") ? md.stringArray("tokenizer.ggml.tokens").length : 0);

        OptionalLong gatingKey = md.optInteger(P + "expert_gating_func");
        GatingFunction gating;
        if (gatingKey.isPresent()) {
            gating = switch ((int) gatingKey.getAsLong()) {
                case 1 -> GatingFunction.SOFTMAX;
                case 2 -> GatingFunction.SIGMOID;
                default ->
                    throw new InvalidInputException(fileName + ": " + P + "expert_gating_func = "
                            + gatingKey.getAsLong() + " is not supported (1 softmax and 2 sigmoid are)");
            };
        } else {
            // llama.cpp's rule for files without the key: the published GLM-4.7-Flash GGUFs use sigmoid.
            gating = (layers == 47 || layers == 48) && vocabSize == 154880
                    ? GatingFunction.SIGMOID
                    : GatingFunction.SOFTMAX;
        }

        return new GlmConfig(
                layers,
                nextn,
                intKey(md, "context_length"),
                intKey(md, "embedding_length"),
                intKey(md, "feed_forward_length"),
                intKey(md, "attention.head_count"),
                (float) md.optNumber(P + "rope.freq_base").orElse(10000.0),
                (float) md.number(P + "attention.layer_norm_rms_epsilon"),
                expertsUsed,
                leadingDense,
                vocabSize,
                (int) md.optInteger(P + "attention.q_lora_rank").orElse(0),
                kvLoraRank,
                keyLengthMla,
                valueLengthMla,
                ropeDims,
                intKey(md, "expert_feed_forward_length"),
                experts,
                (int) md.optInteger(P + "expert_shared_count").orElse(0),
                (float) md.optNumber(P + "expert_weights_scale").orElse(1.0),
                md.optBool(P + "expert_weights_norm").orElse(false),
                gating);
    }

    private static int intKey(GgufMetadata md, String key) {
        long v = md.integer(P + key);
        if (v <= 0 || v > Integer.MAX_VALUE) {
            throw new InvalidInputException("metadata key " + P + key + " = " + v + " is out of range");
        }
        return (int) v;
    }
}
