package dev.glimmer.engine.model;

/**
 * Sees the intermediates of a forward pass, for tests and diagnosis (names follow llama.cpp's graph,
 * e.g. {@code attn_norm}, {@code ffn_moe_probs_biased}). Without a listener the forward pass does no
 * extra work; with one it copies nothing for contiguous intermediates.
 *
 * <p>{@code values} is the buffer the pass computes with: rows {@code 0 .. rows-1} of {@code width}
 * values from index 0 (the buffer may be longer). A diagnosis may change values to see what would
 * follow (the pass continues with the changed values); intermediates that are strided views of a
 * larger buffer ({@code kv_cmpr}, {@code k_pe}, {@code q_pe}, {@code q_nope_absorbed}) come as copies.
 */
@FunctionalInterface
public interface ForwardListener {

    /**
     * @param name   the intermediate's name, without the layer suffix
     * @param layer  the layer, or -1 outside the layers
     * @param rows   rows: one per token of the batch, or per token and head for per-head intermediates
     * @param width  values per row
     * @param values the rows, token-major
     */
    void tensor(String name, int layer, int rows, int width, float[] values);
}
