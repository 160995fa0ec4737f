package dev.glimmer.engine.model;

/**
 * Receives the intermediates of a forward pass (for tests and diagnosis: the names follow
 * llama.cpp's graph, e.g. {@code attn_norm}, {@code ffn_moe_probs_biased}). Without a listener the
 * forward pass does no extra work.
 */
@FunctionalInterface
public interface ForwardListener {

    /**
     * @param name   the intermediate's name, without the layer suffix
     * @param layer  the layer, or -1 outside the layers
     * @param rows   rows in {@code values}: one per token, or per token and head for per-head intermediates
     * @param values a copy, {@code rows} rows of {@code values.length / rows} values, token-major
     */
    void tensor(String name, int layer, int rows, float[] values);
}
