package dev.glimmer.engine.backend.cpu;

import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.model.Backend;
import dev.glimmer.engine.model.WeightMatrix;
import dev.glimmer.engine.tensor.Dequantizer;

/**
 * The CPU backend with the GPU kernels' numerics, the reference of the self-test: matrix products
 * take each weight row dequantized to float and the activations as they are, where {@link CpuBackend}
 * (like llama.cpp's CPU path) first rounds the activations to Q8_0/Q8_K. That rounding moves the logits
 * of a quantized model by a few percent of their range, far more than a kernel's summation order;
 * without it the GPU must agree to about 1e-3. Embedding and attention are the CPU backend's own.
 */
public final class FloatActivationBackend implements Backend {

    private final CpuBackend cpu = new CpuBackend();
    private float[] row = new float[0];

    @Override
    public void embed(WeightMatrix table, int token, float[] out, int outOff) {
        cpu.embed(table, token, out, outOff);
    }

    @Override
    public void matmul(
            WeightMatrix w, float[] x, int xOff, int xStride, int n, float[] out, int outOff, int outStride) {
        if (row.length < w.cols()) {
            row = new float[w.cols()];
        }
        for (int r = 0; r < w.rows(); r++) {
            Dequantizer.dequantizeRow(w.type(), w.data(), r * w.rowBytes(), row, 0, w.cols());
            for (int t = 0; t < n; t++) {
                int base = xOff + t * xStride;
                double sum = 0;
                for (int c = 0; c < w.cols(); c++) {
                    sum += (double) row[c] * x[base + c];
                }
                out[outOff + t * outStride + r] = (float) sum;
            }
        }
    }

    @Override
    public void attention(
            KvCache cache,
            int layer,
            float[] q,
            int n,
            int firstPosition,
            int heads,
            float scale,
            int valueWidth,
            float[] out) {
        cpu.attention(cache, layer, q, n, firstPosition, heads, scale, valueWidth, out);
    }
}
