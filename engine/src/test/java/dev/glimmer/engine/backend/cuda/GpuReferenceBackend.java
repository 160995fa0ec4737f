package dev.glimmer.engine.backend.cuda;

import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.model.Backend;
import dev.glimmer.engine.model.WeightMatrix;
import dev.glimmer.engine.tensor.Dequantizer;

/**
 * The CPU backend with the GPU kernels' numerics: matrix products of dequantized weights with
 * float activations summed in double (no Q8 rounding of the activations, which llama.cpp's CPU
 * path and {@link CpuBackend} do). Embedding and attention are the CPU backend's.
 */
final class GpuReferenceBackend implements Backend {

    private final CpuBackend cpu = new CpuBackend();
    private float[] row = new float[0];

    @Override
    public void embed(WeightMatrix table, int token, float[] out, int outOff) {
        cpu.embed(table, token, out, outOff);
    }

    @Override
    public void matmul(WeightMatrix w, float[] x, int xOff, int xStride, int n, float[] out, int outOff, int outStride) {
        if (row.length < w.cols()) {
            row = new float[w.cols()];
        }
        for (int r = 0; r < w.rows(); r++) {
            Dequantizer.dequantizeRow(w.type(), w.data(), r * w.rowBytes(), row, 0, w.cols());
            for (int t = 0; t < n; t++) {
                double s = 0;
                for (int c = 0; c < w.cols(); c++) {
                    s += (double) row[c] * x[xOff + t * xStride + c];
                }
                out[outOff + t * outStride + r] = (float) s;
            }
        }
    }

    @Override
    public void attention(KvCache cache, int layer, float[] q, int n, int firstPosition, int heads, float scale,
                          int valueWidth, float[] out) {
        cpu.attention(cache, layer, q, n, firstPosition, heads, scale, valueWidth, out);
    }
}
