package dev.glimmer.kernels.decode;

/**
 * The dimensions of a GLM-4.7-Flash-architecture model that the decode command list needs
 * (docs/MODEL.md §2); the engine fills it from its validated config. Kept here, free of engine
 * types, because the dependency runs engine → metal-kernels.
 *
 * @param layers       trunk layers
 * @param denseLayers  leading layers with a dense FFN instead of MoE
 * @param embedding    hidden size
 * @param heads        attention heads
 * @param qLora        q_lora_rank
 * @param latent       kv_lora_rank (the latent part of a cache row)
 * @param nope         non-rotated query dims per head
 * @param rope         rotated dims per head (and of the shared key)
 * @param vHead        value dims per head (rows of v_b per head)
 * @param denseFfn     width of the dense FFN
 * @param expertFfn    width of one expert
 * @param experts      routed experts
 * @param expertsUsed  experts selected per token
 * @param sharedFfn    width of the shared expert(s) (expert width × shared count; 0 for none)
 * @param vocab        rows of the output matrix
 * @param eps          RMS norm epsilon
 * @param ropeBase     RoPE frequency base
 * @param kqScale      attention score scale
 * @param gating       llama.cpp's expert_gating_func: 1 softmax, 2 sigmoid
 * @param expertWeightsScale multiplier of the selected expert weights
 * @param expertWeightsNorm  whether the selected weights are normalized to sum 1
 */
public record ModelShape(
        int layers,
        int denseLayers,
        int embedding,
        int heads,
        int qLora,
        int latent,
        int nope,
        int rope,
        int vHead,
        int denseFfn,
        int expertFfn,
        int experts,
        int expertsUsed,
        int sharedFfn,
        int vocab,
        float eps,
        float ropeBase,
        float kqScale,
        int gating,
        float expertWeightsScale,
        boolean expertWeightsNorm) {

    /** Values of one latent KV cache row (576 in the real model). */
    public int kvRow() {
        return latent + rope;
    }
}
