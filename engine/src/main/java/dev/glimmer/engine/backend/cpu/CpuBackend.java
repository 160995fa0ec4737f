package dev.glimmer.engine.backend.cpu;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.model.Backend;
import dev.glimmer.engine.model.WeightMatrix;

import dev.glimmer.engine.tensor.Dequantizer;
import dev.glimmer.engine.tensor.GgmlType;
import dev.glimmer.engine.tensor.VecDot;

import java.lang.foreign.MemorySegment;

/**
 * The Java backend: SIMD kernels ({@link Kernels}) over weights read in place from the mapping, split
 * across a fixed pool of platform threads ({@link WorkerPool}), with the tensor package's llama.cpp
 * numerics. Weight types without a SIMD kernel use the tensor package's scalar dot products, still in
 * parallel. Not thread-safe (it keeps activation and score buffers): one instance per sequence being
 * computed; instances share the worker threads.
 */
public final class CpuBackend implements Backend {
    /** Below this many multiply-adds a matmul runs on the calling thread alone: the handoff would cost more. */
    private static final long PARALLEL_WORK = 32_768;

    private final WorkerPool pool;
    private final ActivationRows activations = new ActivationRows();
    private final MatmulTask matmul = new MatmulTask();
    private float[] scores = new float[0];

    /** A backend using one thread per physical core. */
    public CpuBackend() {
        this(WorkerPool.physicalCores());
    }

    /** A backend computing with {@code threads} threads (the calling thread included). */
    public CpuBackend(int threads) {
        if (threads < 1) {
            throw new InvalidInputException("the number of threads must be at least 1, got " + threads);
        }
        this.pool = WorkerPool.shared(threads);
    }

    /** Threads this backend computes with. */
    public int threads() {
        return pool.threads();
    }

    /** The number of threads a backend uses by default here: one per physical core. */
    public static int defaultThreads() {
        return WorkerPool.physicalCores();
    }

    @Override
    public void embed(WeightMatrix table, int token, float[] out, int outOff) {
        if (token < 0 || token >= table.rows()) {
            throw new InvalidInputException("token id " + token + " is outside the vocabulary (0.." + (table.rows() - 1) + ")");
        }
        Dequantizer.dequantizeRow(table.type(), table.data(), token * table.rowBytes(), out, outOff, table.cols());
    }

    /**
     * Each activation row is first converted to the weight type's dot-product type (as llama.cpp's
     * CPU matmul does), then the weight rows are split evenly among the threads; each thread takes its
     * rows one by one and dots each with every activation row, so a weight row is read from memory
     * once per call and stays in the L1 cache for the other tokens of the batch.
     */
    @Override
    public void matmul(WeightMatrix w, float[] x, int xOff, int xStride, int n, float[] out, int outOff, int outStride) {
        boolean simd = hasKernel(w.type());
        activations.prepare(w.type(), simd, x, xOff, xStride, n, w.cols());
        matmul.set(w, simd, x, xOff, xStride, n, out, outOff, outStride);
        if ((long) w.rows() * w.cols() * n < PARALLEL_WORK) {
            matmul.run(0, 1);
        } else {
            pool.run(matmul);
        }
        matmul.clear();
    }

    private static boolean hasKernel(GgmlType type) {
        return Kernels.supported() && (type == GgmlType.Q4_0 || type == GgmlType.Q8_0 || type == GgmlType.F32);
    }

    /** One matmul's arguments; share i of k computes rows {@code [rows*i/k, rows*(i+1)/k)}. */
    private final class MatmulTask implements WorkerPool.Task {
        private WeightMatrix w;
        private boolean simd;
        private float[] x;
        private int xOff;
        private int xStride;
        private int n;
        private float[] out;
        private int outOff;
        private int outStride;

        void set(WeightMatrix w, boolean simd, float[] x, int xOff, int xStride, int n, float[] out, int outOff, int outStride) {
            this.w = w;
            this.simd = simd;
            this.x = x;
            this.xOff = xOff;
            this.xStride = xStride;
            this.n = n;
            this.out = out;
            this.outOff = outOff;
            this.outStride = outStride;
        }

        void clear() {
            w = null;
            x = null;
            out = null;
        }

        @Override
        public void run(int worker, int workers) {
            int rows = w.rows();
            int from = (int) ((long) rows * worker / workers);
            int to = (int) ((long) rows * (worker + 1) / workers);
            MemorySegment data = w.data();
            long rowBytes = w.rowBytes();
            int cols = w.cols();
            int blocks = cols / Kernels.QK;
            for (int r = from; r < to; r++) {
                long row = r * rowBytes;
                for (int t = 0; t < n; t++) {
                    out[outOff + t * outStride + r] = !simd
                            ? VecDot.dot(w.type(), data, row, activations.vectors[t], cols)
                            : switch (w.type()) {
                                case Q4_0 -> Kernels.dotQ4_0(data, row, activations.quants, t * cols, activations.scales, t * blocks, blocks);
                                case Q8_0 -> Kernels.dotQ8_0(data, row, activations.quants, t * cols, activations.scales, t * blocks, blocks);
                                case F32 -> Kernels.dotF32(data, row, x, xOff + t * xStride, cols);
                                default -> throw new AssertionError(w.type());
                            };
                }
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

}
