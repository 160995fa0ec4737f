package dev.glimmer.engine.backend.cpu;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.model.Backend;
import dev.glimmer.engine.model.WeightMatrix;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * The plain Java backend: scalar loops over weights read in place from the mapping. Single-threaded
 * and not thread-safe (it keeps a score buffer); one instance per sequence being computed.
 */
public final class CpuBackend implements Backend {
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private float[] scores = new float[0];

    @Override
    public void embed(WeightMatrix table, int token, float[] out, int outOff) {
        if (token < 0 || token >= table.rows()) {
            throw new InvalidInputException("token id " + token + " is outside the vocabulary (0.." + (table.rows() - 1) + ")");
        }
        switch (table.type()) {
            case F32 -> MemorySegment.copy(table.data(), F32, token * table.rowBytes(), out, outOff, table.cols());
            default -> throw unsupported(table);
        }
    }

    @Override
    public void matmul(WeightMatrix w, float[] x, int xOff, int xStride, int n, float[] out, int outOff, int outStride) {
        switch (w.type()) {
            case F32 -> matmulF32(w, x, xOff, xStride, n, out, outOff, outStride);
            default -> throw unsupported(w);
        }
    }

    private static void matmulF32(WeightMatrix w, float[] x, int xOff, int xStride, int n, float[] out, int outOff,
                                  int outStride) {
        MemorySegment data = w.data();
        int cols = w.cols();
        long rowBytes = w.rowBytes();
        for (int r = 0; r < w.rows(); r++) {
            long row = r * rowBytes;
            for (int t = 0; t < n; t++) {
                int xo = xOff + t * xStride;
                float sum = 0f;
                for (int c = 0; c < cols; c++) {
                    sum += data.get(F32, row + 4L * c) * x[xo + c];
                }
                out[outOff + t * outStride + r] = sum;
            }
        }
    }

    @Override
    public void attention(KvCache cache, int layer, float[] q, int n, int firstPosition, int heads, float scale,
                          int valueWidth, float[] out) {
        int width = cache.rowWidth();
        if (scores.length < firstPosition + n) {
            scores = new float[firstPosition + n];
        }
        for (int t = 0; t < n; t++) {
            int last = firstPosition + t;
            for (int h = 0; h < heads; h++) {
                int qo = (t * heads + h) * width;
                float max = Float.NEGATIVE_INFINITY;
                for (int u = 0; u <= last; u++) {
                    float s = cache.dot(layer, u, q, qo) * scale;
                    scores[u] = s;
                    max = Math.max(max, s);
                }
                // Softmax as ggml: exponentials in float, their sum in double.
                double sum = 0;
                for (int u = 0; u <= last; u++) {
                    float e = (float) Math.exp(scores[u] - max);
                    scores[u] = e;
                    sum += e;
                }
                float inv = (float) (1.0 / sum);
                int oo = (t * heads + h) * valueWidth;
                java.util.Arrays.fill(out, oo, oo + valueWidth, 0f);
                for (int u = 0; u <= last; u++) {
                    cache.accumulate(layer, u, scores[u] * inv, out, oo, valueWidth);
                }
            }
        }
    }

    private static InvalidInputException unsupported(WeightMatrix w) {
        return new InvalidInputException("tensor " + w.name() + " has type " + w.type().ggmlName()
                + ", which the CPU backend cannot compute with yet");
    }
}
