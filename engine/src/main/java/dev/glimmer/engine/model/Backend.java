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
     * One matmul per head in one operation: head h multiplies {@code w[h]} (all of one shape and type) with
     * the rows {@code x[xOff + h*xHeadStride + t*xStride ..]} into {@code out[outOff + h*outHeadStride + t*outStride + r]}.
     */
    default void matmulHeads(
            WeightMatrix[] w,
            float[] x,
            int xOff,
            int xHeadStride,
            int xStride,
            int n,
            float[] out,
            int outOff,
            int outHeadStride,
            int outStride) {
        for (int h = 0; h < w.length; h++) {
            matmul(w[h], x, xOff + h * xHeadStride, xStride, n, out, outOff + h * outHeadStride, outStride);
        }
    }

    /**
     * SwiGLU FFNs of selected experts, weighted and summed: for each of {@code n} rows t of {@code x} (row
     * width {@code ffns[i].gate().cols()}) and each of its {@code k} slots s, with {@code e = chosen[t*k+s]},
     * {@code act[(t*k+s)*F ..] = silu(gate_e · x_t) ⊙ (up_e · x_t)} (F the FFN width, kept for tracing) and
     * {@code out[t*E + r] = Σ_s weights[t*k+s] · (down_e · act_{t,s})[r]}, the products of the weights added
     * in slot order, as llama.cpp adds them. A dense FFN is one expert with weight 1.
     *
     * <p>The default computes each slot with {@link #matmul}s; a backend overrides it to group tokens per expert
     * and fuse the steps (allocating here is fine: the defaults serve reference backends).
     */
    default void expertFfn(
            GlmWeights.Ffn[] ffns, int[] chosen, float[] weights, int k, float[] x, int n, float[] act, float[] out) {
        GlmWeights.Ffn any = ffns[chosen[0]];
        int width = any.gate().rows();
        int in = any.gate().cols();
        int outWidth = any.down().rows();
        float[] up = new float[width];
        float[] down = new float[outWidth];
        for (int t = 0; t < n; t++) {
            for (int s = 0; s < k; s++) {
                int slot = t * k + s;
                GlmWeights.Ffn f = ffns[chosen[slot]];
                matmul(f.gate(), x, t * in, in, 1, act, slot * width, width);
                matmul(f.up(), x, t * in, in, 1, up, 0, width);
                for (int i = 0; i < width; i++) {
                    act[slot * width + i] = silu(act[slot * width + i]) * up[i];
                }
                matmul(f.down(), act, slot * width, width, 1, down, 0, outWidth);
                for (int r = 0; r < outWidth; r++) {
                    float v = down[r] * weights[slot];
                    out[t * outWidth + r] = s == 0 ? v : out[t * outWidth + r] + v;
                }
            }
        }
    }

    /** SiLU as ggml computes it for SwiGLU: {@code v / (1 + exp(-v))}, the exponential in float. */
    static float silu(float v) {
        return v / (1.0f + (float) Math.exp(-v));
    }

    /**
     * Causal multi-head attention of {@code n} new tokens over the latent cache of {@code layer}. Token t
     * sits at position {@code firstPosition + t} and sees positions {@code 0 .. firstPosition + t}
     * (their rows must be written). {@code q} holds {@code [n][heads][cache.rowWidth()]};
     * {@code out} receives {@code [n][heads][valueWidth]}: {@code Σ_u softmax_u(scale · Q·K_u) · V_u},
     * V_u being the first {@code valueWidth} values of row u.
     */
    void attention(
            KvCache cache,
            int layer,
            float[] q,
            int n,
            int firstPosition,
            int heads,
            float scale,
            int valueWidth,
            float[] out);
}
