package dev.glimmer.engine.backend.cpu;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.model.Backend;
import dev.glimmer.engine.model.WeightMatrix;

import dev.glimmer.engine.tensor.Dequantizer;
import dev.glimmer.engine.tensor.GgmlType;
import dev.glimmer.engine.tensor.QuantizedVector;
import dev.glimmer.engine.tensor.VecDot;

import java.lang.foreign.MemorySegment;
import java.util.EnumMap;
import java.util.Map;

/**
 * The plain Java backend: scalar loops over weights read in place from the mapping, with the
 * tensor package's llama.cpp numerics for every weight type. Single-threaded and not thread-safe
 * (it keeps activation and score buffers); one instance per sequence being computed.
 */
public final class CpuBackend implements Backend {
    private final Map<GgmlType, QuantizedVector[]> activationRows = new EnumMap<>(GgmlType.class);
    private float[] scores = new float[0];

    @Override
    public void embed(WeightMatrix table, int token, float[] out, int outOff) {
        if (token < 0 || token >= table.rows()) {
            throw new InvalidInputException("token id " + token + " is outside the vocabulary (0.." + (table.rows() - 1) + ")");
        }
        Dequantizer.dequantizeRow(table.type(), table.data(), token * table.rowBytes(), out, outOff, table.cols());
    }

    /**
     * Each activation row is first converted to the weight type's dot-product type (as llama.cpp's
     * CPU matmul does), then every weight row is dotted with every activation row: weight rows outer,
     * so each is read from the mapping once per call.
     */
    @Override
    public void matmul(WeightMatrix w, float[] x, int xOff, int xStride, int n, float[] out, int outOff, int outStride) {
        QuantizedVector[] rows = activations(w.type(), n);
        for (int t = 0; t < n; t++) {
            rows[t].quantize(x, xOff + t * xStride, w.cols());
        }
        MemorySegment data = w.data();
        long rowBytes = w.rowBytes();
        for (int r = 0; r < w.rows(); r++) {
            for (int t = 0; t < n; t++) {
                out[outOff + t * outStride + r] = VecDot.dot(w.type(), data, r * rowBytes, rows[t], w.cols());
            }
        }
    }

    /** At least {@code n} reusable activation vectors of the dot-product type of {@code weightType}. */
    private QuantizedVector[] activations(GgmlType weightType, int n) {
        GgmlType type = VecDot.vecDotType(weightType);
        QuantizedVector[] rows = activationRows.get(type);
        if (rows == null || rows.length < n) {
            QuantizedVector[] grown = new QuantizedVector[n];
            for (int i = 0; i < n; i++) {
                grown[i] = rows != null && i < rows.length ? rows[i] : new QuantizedVector(type);
            }
            activationRows.put(type, grown);
            rows = grown;
        }
        return rows;
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

}
