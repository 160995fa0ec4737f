package dev.glimmer.engine.model;

import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.gguf.TensorInfo;
import dev.glimmer.engine.tensor.Dequantizer;

/**
 * A second, independent forward pass in double precision for tests: the plain textbook MLA (keys and
 * values up-projected per head from the latent, no absorption, no cache, every position recomputed),
 * read from the file by tensor name. It shares only the config with the engine.
 */
final class ReferenceForward {
    private final GgufFile file;
    private final GlmConfig c;

    ReferenceForward(GgufFile file, GlmConfig c) {
        this.file = file;
        this.c = c;
    }

    /** Logits of every position of {@code tokens}. */
    double[][] logits(int[] tokens) {
        int n = tokens.length;
        double[][] embd = matrix("token_embd.weight");
        double[][] x = new double[n][];
        for (int t = 0; t < n; t++) {
            x[t] = embd[tokens[t]].clone();
        }
        for (int il = 0; il < c.layers(); il++) {
            String b = "blk." + il + ".";
            double[][] h = new double[n][];
            for (int t = 0; t < n; t++) {
                h[t] = rms(x[t], vector(b + "attn_norm.weight"));
            }
            double[][] attn = attention(b, h);
            for (int t = 0; t < n; t++) {
                add(x[t], attn[t]);
                double[] hn = rms(x[t], vector(b + "ffn_norm.weight"));
                add(x[t], il < c.leadingDenseBlocks() ? ffn(b + "ffn_%s.weight", hn) : moe(b, hn));
            }
        }
        double[][] output = file.findTensor("output.weight").isPresent() ? matrix("output.weight") : embd;
        double[][] logits = new double[n][];
        for (int t = 0; t < n; t++) {
            logits[t] = mul(output, rms(x[t], vector("output_norm.weight")));
        }
        return logits;
    }

    private double[][] attention(String b, double[][] h) {
        int n = h.length;
        int heads = c.heads();
        int nope = c.nopeDims();
        int rope = c.ropeDims();
        int kvr = c.kvLoraRank();
        int kmla = c.keyLengthMla();
        int vh = c.valueLengthMla();
        double[][][] kb = stack(b + "attn_k_b.weight"); // [head][kvr][nope]
        double[][][] vb = stack(b + "attn_v_b.weight"); // [head][vh][kvr]
        double[][] q = new double[n][];
        double[][] latent = new double[n][];
        double[][] kPe = new double[n][];
        for (int t = 0; t < n; t++) {
            q[t] = c.qLoraRank() > 0
                    ? mul(
                            matrix(b + "attn_q_b.weight"),
                            rms(mul(matrix(b + "attn_q_a.weight"), h[t]), vector(b + "attn_q_a_norm.weight")))
                    : mul(matrix(b + "attn_q.weight"), h[t]);
            double[] kv = mul(matrix(b + "attn_kv_a_mqa.weight"), h[t]);
            latent[t] = rms(java.util.Arrays.copyOf(kv, kvr), vector(b + "attn_kv_a_norm.weight"));
            kPe[t] = rope(java.util.Arrays.copyOfRange(kv, kvr, kvr + rope), t);
        }
        double[][] out = new double[n][heads * vh];
        for (int hd = 0; hd < heads; hd++) {
            // Per-head keys and values from the latent: k_nope[d] = Σ_c k_b[c][d]·latent[c], v[j] = Σ_c
            // v_b[j][c]·latent[c].
            double[][] kNope = new double[n][nope];
            double[][] v = new double[n][vh];
            for (int u = 0; u < n; u++) {
                for (int cc = 0; cc < kvr; cc++) {
                    for (int d = 0; d < nope; d++) {
                        kNope[u][d] += kb[hd][cc][d] * latent[u][cc];
                    }
                }
                v[u] = mul(vb[hd], latent[u]);
            }
            for (int t = 0; t < n; t++) {
                double[] qNope = java.util.Arrays.copyOfRange(q[t], hd * kmla, hd * kmla + nope);
                double[] qPe = rope(java.util.Arrays.copyOfRange(q[t], hd * kmla + nope, hd * kmla + kmla), t);
                double[] scores = new double[t + 1];
                double max = Double.NEGATIVE_INFINITY;
                for (int u = 0; u <= t; u++) {
                    scores[u] = (dot(qNope, kNope[u]) + dot(qPe, kPe[u])) / Math.sqrt(kmla);
                    max = Math.max(max, scores[u]);
                }
                double sum = 0;
                for (int u = 0; u <= t; u++) {
                    scores[u] = Math.exp(scores[u] - max);
                    sum += scores[u];
                }
                for (int u = 0; u <= t; u++) {
                    for (int j = 0; j < vh; j++) {
                        out[t][hd * vh + j] += scores[u] / sum * v[u][j];
                    }
                }
            }
        }
        double[][] wo = matrix(b + "attn_output.weight");
        double[][] result = new double[n][];
        for (int t = 0; t < n; t++) {
            result[t] = mul(wo, out[t]);
        }
        return result;
    }

    /** {@code down · (silu(gate·h) ⊙ up·h)} with the tensors named by {@code pattern} (%s = gate, up, down). */
    private double[] ffn(String pattern, double[] h) {
        return ffn(
                matrix(pattern.formatted("gate")),
                matrix(pattern.formatted("up")),
                matrix(pattern.formatted("down")),
                h);
    }

    private static double[] ffn(double[][] gate, double[][] up, double[][] down, double[] h) {
        double[] g = mul(gate, h);
        double[] u = mul(up, h);
        for (int i = 0; i < g.length; i++) {
            g[i] = g[i] / (1 + Math.exp(-g[i])) * u[i];
        }
        return mul(down, g);
    }

    private double[] moe(String b, double[] h) {
        double[] logits = mul(matrix(b + "ffn_gate_inp.weight"), h);
        int experts = logits.length;
        double[] p = new double[experts];
        if (c.gating() == GlmConfig.GatingFunction.SIGMOID) {
            for (int j = 0; j < experts; j++) {
                p[j] = 1 / (1 + Math.exp(-logits[j]));
            }
        } else {
            double max = java.util.Arrays.stream(logits).max().orElseThrow();
            double sum = 0;
            for (int j = 0; j < experts; j++) {
                p[j] = Math.exp(logits[j] - max);
                sum += p[j];
            }
            for (int j = 0; j < experts; j++) {
                p[j] /= sum;
            }
        }
        double[] bias = file.findTensor(b + "exp_probs_b.bias").isPresent()
                ? vector(b + "exp_probs_b.bias")
                : new double[experts];
        boolean[] taken = new boolean[experts];
        int[] chosen = new int[c.expertsUsed()];
        double weightSum = 0;
        for (int k = 0; k < chosen.length; k++) {
            int best = -1;
            for (int j = 0; j < experts; j++) {
                if (!taken[j] && (best < 0 || p[j] + bias[j] > p[best] + bias[best])) {
                    best = j;
                }
            }
            taken[best] = true;
            chosen[k] = best;
            weightSum += p[best];
        }
        boolean merged = file.findTensor(b + "ffn_gate_up_exps.weight").isPresent();
        double[][][] gateUp = merged ? stack(b + "ffn_gate_up_exps.weight") : null;
        double[][][] gates = merged ? null : stack(b + "ffn_gate_exps.weight");
        double[][][] ups = merged ? null : stack(b + "ffn_up_exps.weight");
        double[][][] downs = stack(b + "ffn_down_exps.weight");
        double[] out = new double[h.length];
        for (int e : chosen) {
            double w = p[e] * (c.expertWeightsNorm() ? 1 / weightSum : 1) * c.expertWeightsScale();
            double[][] gate = merged ? java.util.Arrays.copyOfRange(gateUp[e], 0, c.expertFfn()) : gates[e];
            double[][] up = merged ? java.util.Arrays.copyOfRange(gateUp[e], c.expertFfn(), 2 * c.expertFfn()) : ups[e];
            double[] y = ffn(gate, up, downs[e], h);
            for (int i = 0; i < out.length; i++) {
                out[i] += w * y[i];
            }
        }
        if (c.sharedExperts() > 0) {
            add(out, ffn(b + "ffn_%s_shexp.weight", h));
        }
        return out;
    }

    /** Rotates adjacent pairs by pos·base^(-2i/dims) (RoPE type NORM). */
    private double[] rope(double[] v, int pos) {
        double[] r = v.clone();
        for (int i = 0; i < v.length / 2; i++) {
            double theta = pos * Math.pow(c.ropeBase(), -2.0 * i / c.ropeDims());
            r[2 * i] = v[2 * i] * Math.cos(theta) - v[2 * i + 1] * Math.sin(theta);
            r[2 * i + 1] = v[2 * i] * Math.sin(theta) + v[2 * i + 1] * Math.cos(theta);
        }
        return r;
    }

    private double[] rms(double[] v, double[] w) {
        double ss = 0;
        for (double a : v) {
            ss += a * a;
        }
        double scale = 1 / Math.sqrt(ss / v.length + c.rmsEps());
        double[] r = new double[v.length];
        for (int i = 0; i < v.length; i++) {
            r[i] = v[i] * scale * w[i];
        }
        return r;
    }

    private static void add(double[] a, double[] b) {
        for (int i = 0; i < a.length; i++) {
            a[i] += b[i];
        }
    }

    private static double dot(double[] a, double[] b) {
        double s = 0;
        for (int i = 0; i < a.length; i++) {
            s += a[i] * b[i];
        }
        return s;
    }

    private static double[] mul(double[][] m, double[] v) {
        double[] r = new double[m.length];
        for (int i = 0; i < m.length; i++) {
            r[i] = dot(m[i], v);
        }
        return r;
    }

    private double[] vector(String name) {
        return matrix(name)[0];
    }

    /** A 2-d tensor as rows of ne0 values (a 1-d tensor is one row). */
    private double[][] matrix(String name) {
        return stack(name)[0];
    }

    /** A tensor as [ne2][ne1][ne0]. */
    private double[][][] stack(String name) {
        TensorInfo t = file.tensor(name);
        int ne0 = (int) t.ne(0);
        int ne1 = (int) t.ne(1);
        int ne2 = (int) t.ne(2);
        float[] row = new float[ne0];
        double[][][] r = new double[ne2][ne1][ne0];
        for (int k = 0; k < ne2; k++) {
            for (int j = 0; j < ne1; j++) {
                Dequantizer.dequantizeRow(t.type(), file.data(t), ((long) k * ne1 + j) * t.rowBytes(), row, 0, ne0);
                for (int i = 0; i < ne0; i++) {
                    r[k][j][i] = row[i];
                }
            }
        }
        return r;
    }
}
