package dev.glimmer.engine.model;

import dev.glimmer.engine.kv.KvCache;

/**
 * The heavy operations of the forward pass, so that they can be made fast (or moved to a GPU)
 * without touching the readable math in {@link GlmForward}. Activations are float arrays of
 * {@code n} rows (one per token); offsets and strides say where a row starts.
 *
 * <p>Implementations must reproduce llama.cpp's CPU numerics where they change results: the
 * activations of a matrix product are rounded to the weight type's dot-product type (Q8_0 for
 * Q4_0/Q5_x/Q8_0 weights, Q8_K for K-quants, F16 for F16) before the dot product.
 */
public interface Backend {

    /** Row {@code token} of {@code table}, dequantized into {@code out[outOff ..]}. */
    void embed(WeightMatrix table, int token, float[] out, int outOff);

    /**
     * For each of {@code n} activation rows t: {@code out[outOff + t*outStride + r] = W[r] · x[xOff + t*xStride ..]}
     * for every row r of {@code w}.
     */
    void matmul(WeightMatrix w, float[] x, int xOff, int xStride, int n, float[] out, int outOff, int outStride);

    /**
     * Causal multi-head attention of {@code n} new tokens over the latent cache of {@code layer}. Token t
     * sits at position {@code firstPosition + t} and sees positions {@code 0 .. firstPosition + t}
     * (their rows must be written). {@code q} holds {@code [n][heads][cache.rowWidth()]};
     * {@code out} receives {@code [n][heads][valueWidth]}: {@code Σ_u softmax_u(scale · Q·K_u) · V_u},
     * V_u being the first {@code valueWidth} values of row u.
     */
    void attention(KvCache cache, int layer, float[] q, int n, int firstPosition, int heads, float scale,
                   int valueWidth, float[] out);
}
