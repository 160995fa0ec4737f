package dev.glimmer.engine.backend.cpu;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.model.Backend;
import dev.glimmer.engine.model.GlmWeights;
import dev.glimmer.engine.model.WeightMatrix;
import dev.glimmer.engine.tensor.Dequantizer;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The CPU backend: kernels over weights read in place from the mapping, split across a fixed pool of
 * platform threads ({@link WorkerPool}), with the tensor package's llama.cpp numerics. Q4_0 weights (and on
 * x86-64 Q4_K, Q5_K, Q6_K and Q5_0 weights) go through the native kernels where they run ({@link NativeKernels}:
 * AVX-512 VNNI, AVX-VNNI, AVX2 or NEON variants), every other type and every machine without them through the
 * Vector API kernels
 * ({@link Kernels}, {@link KQuantKernels}); all give the same bits. Weight types without a SIMD kernel use the tensor package's scalar dot products,
 * still in parallel. A Java-kernel operation splits its output rows evenly among the threads; a native
 * one hands out ranges of rows as threads finish ({@link #takeUnits}). Either way a weight row is read
 * from memory once per operation and stays in the L1 cache while it is dotted with every token of the
 * batch that needs it.
 *
 * <p>Not thread-safe (it keeps activation buffers and task objects, so that the decode path allocates
 * nothing): one instance per sequence being computed; instances share the worker threads.
 */
public final class CpuBackend implements Backend {
    /** Below this many multiply-adds an operation runs on the calling thread alone: the handoff would cost more. */
    private static final long PARALLEL_WORK = 32_768;

    /**
     * The values each worker's buffer holds ({@link NativeCall}, 256 KB): what one call of the native
     * kernel may return, or in the experts' down pass all slots' values of a run of rows. Large, so that
     * each call streams a long run of one matrix's rows: runs of 16 rows (64 experts' down rows for a
     * 64-token prompt, each from another place) streamed at a third of the speed of long ones.
     */
    private static final int NATIVE_VALUES = 1 << 16;
    /** The least weight bytes a worker takes at once in a native operation (a few microseconds of streaming). */
    private static final long NATIVE_MIN_BYTES = 32 << 10;

    private final WorkerPool pool;
    /** The native kernels' variant Q4_0 (and K-quant, Q5_0) weights go through ({@link NativeKernels}), or null for the Java kernels. */
    private final NativeKernels.Variant nativeKernel;

    private final ActivationRows inputs;
    private final ActivationRows hidden;
    private final MatmulTask matmul = new MatmulTask();
    private final ExpertTask experts = new ExpertTask();
    private final CpuAttention attention;
    /** Per thread: 4 results of a {@link ActivationRows#dot4}, twice. */
    private final float[][] quads;

    private final float[][] quads2;
    /** Per thread: one output row's down-projection value for every slot of a batch (grown, never shrunk). */
    private final float[][] slotValues;
    /** Per thread: the index list and output buffer of its native kernel calls. */
    private final NativeCall[] nativeCalls;
    /**
     * The first unit (row of a head or an expert, or output row) not yet taken in a native operation: the
     * workers take ranges as they finish the last ({@link #takeUnits}). A static split left one thread
     * waiting for the other for a third of a decode step (memory-bound shares do not finish together),
     * and small fixed chunks streamed a fifth slower than large ones. Reset before each operation.
     */
    private final AtomicInteger nextUnit = new AtomicInteger();

    private final CpuProfile profile = new CpuProfile();

    /** A backend using one thread per physical core. */
    public CpuBackend() {
        this(WorkerPool.physicalCores());
    }

    /**
     * A backend computing with {@code threads} threads (the calling thread included), with the native
     * Q4_0 kernel's variant chosen for this processor ({@link #kernels()} says which), or the Java kernels.
     *
     * @throws InvalidInputException when {@code GLIMMER_CPU_KERNELS} names no kernels or ones this processor cannot run
     */
    public CpuBackend(int threads) {
        this(threads, NativeKernels.chosen());
    }

    /**
     * A backend computing with {@code threads} threads and the native kernels' {@code nativeKernel} variant
     * (which must run here), or the Java kernels when null; all give the same bits.
     */
    CpuBackend(int threads, NativeKernels.Variant nativeKernel) {
        if (nativeKernel != null && !NativeKernels.runs(nativeKernel)) {
            throw new IllegalStateException("the native kernels' " + nativeKernel.setting + " variant cannot run here");
        }
        if (threads < 1) {
            throw new InvalidInputException("the number of threads must be at least 1, got " + threads);
        }
        this.pool = WorkerPool.shared(threads);
        this.attention = new CpuAttention(pool);
        this.quads = new float[threads][4];
        this.quads2 = new float[threads][4];
        this.slotValues = new float[threads][0];
        this.nativeKernel = nativeKernel;
        NativeKernels.Variant typedKernel =
                nativeKernel != null && NativeKernels.hasTypedKernels(nativeKernel) ? nativeKernel : null;
        this.inputs = new ActivationRows(nativeKernel != null, typedKernel);
        this.hidden = new ActivationRows(nativeKernel != null, typedKernel);
        this.nativeCalls = new NativeCall[threads];
        for (int i = 0; i < threads; i++) {
            nativeCalls[i] = new NativeCall(nativeKernel);
        }
    }

    /** Where this backend's time went since it was made or the profile last reset. */
    public CpuProfile profile() {
        return profile;
    }

    /** The kernels this backend multiplies with, for logs and benchmarks. */
    public String kernels() {
        String java = "Java kernels on " + Kernels.vectorBits() + "-bit vectors";
        if (nativeKernel != null) {
            String types = NativeKernels.hasTypedKernels(nativeKernel)
                    ? "Q4_0, Q4_K, Q5_K, Q6_K and Q5_0 kernels"
                    : "Q4_0 kernel";
            return "native " + types + " (" + nativeKernel.instructions + "), " + java;
        }
        return NativeKernels.whyJava() == null ? java : java + " (" + NativeKernels.whyJava() + ")";
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
            throw new InvalidInputException(
                    "token id " + token + " is outside the vocabulary (0.." + (table.rows() - 1) + ")");
        }
        Dequantizer.dequantizeRow(table.type(), table.data(), token * table.rowBytes(), out, outOff, table.cols());
    }

    @Override
    public void matmul(
            WeightMatrix w, float[] x, int xOff, int xStride, int n, float[] out, int outOff, int outStride) {
        long start = System.nanoTime();
        inputs.reserve(w.type(), n, w.cols());
        inputs.set(w.type(), 0, x, xOff, xStride, n, w.cols());
        profile.add(CpuProfile.Op.ACTIVATIONS, start, 0, 0);
        start = System.nanoTime();
        matmul.set(w, null, n, out, outOff, 0, outStride);
        dispatch(matmul, (long) w.rows() * w.cols() * n);
        profile.add(CpuProfile.Op.MATMUL, start, w.rows() * w.rowBytes(), (long) w.rows() * w.cols() * n);
    }

    /**
     * One operation for all heads: the activation rows of every head are converted first (row
     * {@code h*n + t}), then the (head, row) pairs are split among the threads.
     */
    @Override
    public void matmulHeads(
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
        long start = System.nanoTime();
        WeightMatrix first = w[0];
        inputs.reserve(first.type(), w.length * n, first.cols());
        for (int h = 0; h < w.length; h++) {
            inputs.set(first.type(), h * n, x, xOff + h * xHeadStride, xStride, n, first.cols());
        }
        profile.add(CpuProfile.Op.ACTIVATIONS, start, 0, 0);
        start = System.nanoTime();
        matmul.set(null, w, n, out, outOff, outHeadStride, outStride);
        dispatch(matmul, (long) w.length * first.rows() * first.cols() * n);
        profile.add(
                CpuProfile.Op.MATMUL_HEADS,
                start,
                w.length * first.rows() * first.rowBytes(),
                (long) w.length * first.rows() * first.cols() * n);
    }

    @Override
    public void expertFfn(
            GlmWeights.Ffn[] ffns, int[] chosen, float[] weights, int k, float[] x, int n, float[] act, float[] out) {
        experts.compute(ffns, chosen, weights, k, x, n, act, out);
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
        long start = System.nanoTime();
        attention.compute(cache, layer, q, n, firstPosition, heads, scale, valueWidth, out);
        profile.add(CpuProfile.Op.ATTENTION, start, 0, 0);
    }

    /**
     * Takes the next range of a native operation's {@code total} units into {@code range} ({@code [start,
     * end)}), false when none is left: a share of what is left ("guided" scheduling: a quarter of it with 2
     * threads, so the threads start far apart and stream long runs), at least {@code minUnits}.
     */
    private boolean takeUnits(int total, int minUnits, int[] range) {
        while (true) {
            int start = nextUnit.get();
            if (start >= total) {
                return false;
            }
            int size = Math.min(total - start, Math.max(minUnits, (total - start) / (2 * pool.threads())));
            if (nextUnit.compareAndSet(start, start + size)) {
                range[0] = start;
                range[1] = start + size;
                return true;
            }
        }
    }

    /** The least units of {@code unitBytes} weight bytes each that a worker takes at once. */
    private static int minUnits(long unitBytes) {
        return (int) Math.max(1, NATIVE_MIN_BYTES / unitBytes);
    }

    private void dispatch(WorkerPool.Task task, long work) {
        nextUnit.set(0);
        if (work < PARALLEL_WORK) {
            task.run(0, 1);
        } else {
            pool.run(task);
        }
    }

    /** Share {@code worker} of {@code workers} of {@code units} units: {@code [from, to)}. */
    static int shareStart(int units, int worker, int workers) {
        return (int) ((long) units * worker / workers);
    }

    /**
     * A matmul, or one matmul per head (head h: weights {@code heads[h]}, activation rows {@code h*n + t},
     * output at {@code outOff + h*outHeadStride}); the units split among threads are (head, row) pairs.
     */
    private final class MatmulTask implements WorkerPool.Task {
        private WeightMatrix single;
        private WeightMatrix[] heads;
        private int n;
        private float[] out;
        private int outOff;
        private int outHeadStride;
        private int outStride;

        void set(
                WeightMatrix single,
                WeightMatrix[] heads,
                int n,
                float[] out,
                int outOff,
                int outHeadStride,
                int outStride) {
            this.single = single;
            this.heads = heads;
            this.n = n;
            this.out = out;
            this.outOff = outOff;
            this.outHeadStride = outHeadStride;
            this.outStride = outStride;
        }

        @Override
        public void run(int worker, int workers) {
            int rows = single != null ? single.rows() : heads[0].rows();
            int count = single != null ? 1 : heads.length;
            if (inputs.nativeFor(single != null ? single : heads[0])) {
                runNative(count, rows, nativeCalls[worker]);
                return;
            }
            int from = shareStart(count * rows, worker, workers);
            int to = shareStart(count * rows, worker + 1, workers);
            for (int unit = from; unit < to; unit++) {
                int h = unit / rows;
                int r = unit % rows;
                WeightMatrix w = single != null ? single : heads[h];
                int o = outOff + h * outHeadStride + r;
                int t = 0;
                float[] four = quads[worker];
                for (; t + 4 <= n; t += 4) {
                    int i = h * n + t;
                    inputs.dot4(w, r, i, i + 1, i + 2, i + 3, four);
                    for (int j = 0; j < 4; j++) {
                        out[o + (t + j) * outStride] = four[j];
                    }
                }
                for (; t < n; t++) {
                    out[o + t * outStride] = inputs.dot(w, r, h * n + t);
                }
            }
        }

        /**
         * The {@code count} heads of {@code rows} rows through the native kernel, ranges of (head, row)
         * units as this worker takes them, each cut at heads and at what the worker's buffer holds.
         */
        private void runNative(int count, int rows, NativeCall call) {
            WeightMatrix first = single != null ? single : heads[0];
            int most = Math.max(1, NATIVE_VALUES / n);
            call.tokens(n);
            call.values(n);
            while (takeUnits(count * rows, minUnits(first.rowBytes()), call.range)) {
                for (int unit = call.range[0]; unit < call.range[1]; ) {
                    int h = unit / rows;
                    int r0 = unit % rows;
                    int r1 = Math.min(Math.min(rows, r0 + most), r0 + call.range[1] - unit);
                    for (int t = 0; t < n; t++) {
                        call.xRows[t] = h * n + t;
                    }
                    call.multiply(single != null ? single : heads[h], r0, r1, inputs, n, 0);
                    int o = outOff + h * outHeadStride;
                    int len = r1 - r0;
                    for (int t = 0; t < n; t++) {
                        for (int r = r0; r < r1; r++) {
                            out[o + r + t * outStride] = call.values[t * len + r - r0];
                        }
                    }
                    unit += len;
                }
            }
        }
    }

    /**
     * One worker's calls of the native kernel: the activation rows to multiply ({@link #xRows}) and the
     * results, {@code values[offset + j*len + (r - r0)]} for rows {@code [r0, r0+len)} (grown, never
     * shrunk), each with the memory segment the downcall takes.
     */
    private static final class NativeCall {
        private final NativeKernels.Variant kernel;
        int[] xRows = new int[0];
        float[] values = new float[NATIVE_VALUES];
        /** The range of units this worker took last ({@link #takeUnits}). */
        final int[] range = new int[2];

        private MemorySegment xRowsSegment = MemorySegment.ofArray(xRows);
        private MemorySegment valuesSegment = MemorySegment.ofArray(values);

        NativeCall(NativeKernels.Variant kernel) {
            this.kernel = kernel;
        }

        /** Makes room for {@code count} values (more than {@link #NATIVE_VALUES} only for batches of tens of thousands of tokens). */
        void values(int count) {
            if (values.length < count) {
                values = new float[count];
                valuesSegment = MemorySegment.ofArray(values);
            }
        }

        /** Makes room for {@code n} activation rows. */
        void tokens(int n) {
            if (xRows.length < n) {
                xRows = new int[n];
                xRowsSegment = MemorySegment.ofArray(xRows);
            }
        }

        /**
         * Rows {@code [r0, r1)} of {@code w} (a type {@link ActivationRows#nativeFor} the rows {@code x}) ·
         * activation rows {@code xRows[0..n)} of {@code x}, from {@code values[offset]}.
         */
        void multiply(WeightMatrix w, int r0, int r1, ActivationRows x, int n, int offset) {
            switch (w.type()) {
                case Q4_0 ->
                    NativeKernels.q4_0Matmul(
                            kernel,
                            w.data(),
                            w.rowBytes(),
                            w.cols() / Kernels.QK,
                            r0,
                            r1,
                            x.nativeQuantsSegment,
                            x.nativeBiasesSegment,
                            x.laneScalesSegment,
                            xRowsSegment,
                            n,
                            valuesSegment,
                            offset,
                            r1 - r0);
                case Q4_K, Q5_K, Q6_K, Q5_0 ->
                    NativeKernels.typedMatmul(
                            kernel,
                            w.type(),
                            w.data(),
                            w.rowBytes(),
                            w.cols() / w.type().blockSize,
                            r0,
                            r1,
                            x.byteQuantsSegment,
                            x.scalesSegment,
                            x.blockSumsSegment,
                            xRowsSegment,
                            n,
                            valuesSegment,
                            offset,
                            r1 - r0);
                default -> throw new IllegalStateException("no native kernel for " + w.type());
            }
        }
    }

    /**
     * The expert FFNs of a batch in two parallel phases. Tokens are grouped per expert, so that each
     * selected expert's weights are read once for all the tokens that chose it.
     * <ol>
     *   <li>gate and up: the units are (selected expert, row) pairs; each unit reads the gate and the
     *       up row once and computes {@code silu(gate·x) · (up·x)} for every token of the expert, into
     *       the token's slot of {@code act};</li>
     *   <li>down, fused with the weighted sum: the units are output rows; each computes the row's
     *       {@code down_e · act} for every slot, expert by expert (so each expert's row is unpacked once
     *       for up to four of its tokens), then sums, per token, its slots' {@code weight · value} in slot
     *       order (as llama.cpp adds the slots).</li>
     * </ol>
     */
    private final class ExpertTask implements WorkerPool.Task {
        private GlmWeights.Ffn[] ffns;
        private int[] chosen;
        private float[] weights;
        private int k;
        private int n;
        private float[] act;
        private float[] out;
        private boolean down;
        /** The selected experts, and for each the slots (t*k + s) that chose it, in token order. */
        private int[] selected = new int[0];

        private int selectedCount;
        private int[][] slotsOf = new int[0][];
        private int[] slotCount = new int[0];
        /** For each slot, its place in the slots listed expert after expert (where the native down pass puts its value). */
        private int[] placeOf = new int[0];

        void compute(
                GlmWeights.Ffn[] ffns,
                int[] chosen,
                float[] weights,
                int k,
                float[] x,
                int n,
                float[] act,
                float[] out) {
            this.ffns = ffns;
            this.chosen = chosen;
            this.weights = weights;
            this.k = k;
            this.n = n;
            this.act = act;
            this.out = out;
            long start = System.nanoTime();
            group();
            GlmWeights.Ffn any = ffns[selected[0]];
            int hiddenWidth = any.gate().rows();
            int width = any.gate().cols();
            inputs.reserve(any.gate().type(), n, width);
            inputs.set(any.gate().type(), 0, x, 0, width, n, width);
            profile.add(CpuProfile.Op.ACTIVATIONS, start, 0, 0);
            start = System.nanoTime();
            down = false;
            dispatch(this, 2L * n * k * hiddenWidth * width);
            profile.add(
                    CpuProfile.Op.EXPERTS_GATE_UP,
                    start,
                    2L * selectedCount * hiddenWidth * any.gate().rowBytes(),
                    2L * n * k * hiddenWidth * width);
            start = System.nanoTime();
            hidden.reserve(any.down().type(), n * k, hiddenWidth);
            hidden.set(any.down().type(), 0, act, 0, hiddenWidth, n * k, hiddenWidth);
            profile.add(CpuProfile.Op.ACTIVATIONS, start, 0, 0);
            start = System.nanoTime();
            if (slotValues[0].length < n * k) {
                for (int i = 0; i < slotValues.length; i++) {
                    slotValues[i] = new float[n * k];
                }
            }
            down = true;
            dispatch(this, (long) n * k * hiddenWidth * width);
            profile.add(
                    CpuProfile.Op.EXPERTS_DOWN,
                    start,
                    (long) selectedCount * width * any.down().rowBytes(),
                    (long) n * k * hiddenWidth * width);
            this.ffns = null;
            this.act = null;
            this.out = null;
        }

        /** Fills {@link #selected} and {@link #slotsOf} from {@link #chosen}. */
        private void group() {
            int expertCount = ffns.length;
            if (slotsOf.length < expertCount || (expertCount > 0 && slotsOf[0].length < n * k)) {
                slotsOf = new int[expertCount][n * k];
                slotCount = new int[expertCount];
                selected = new int[expertCount];
            }
            java.util.Arrays.fill(slotCount, 0);
            selectedCount = 0;
            for (int slot = 0; slot < n * k; slot++) {
                int e = chosen[slot];
                if (slotCount[e] == 0) {
                    selected[selectedCount++] = e;
                }
                slotsOf[e][slotCount[e]++] = slot;
            }
            if (placeOf.length < n * k) {
                placeOf = new int[n * k];
            }
            int place = 0;
            for (int j = 0; j < selectedCount; j++) {
                int e = selected[j];
                for (int i = 0; i < slotCount[e]; i++) {
                    placeOf[slotsOf[e][i]] = place++;
                }
            }
        }

        @Override
        public void run(int worker, int workers) {
            if (down) {
                downRows(worker, workers);
            } else {
                gateUpRows(worker, workers);
            }
        }

        private void gateUpRows(int worker, int workers) {
            int rows = ffns[selected[0]].gate().rows();
            if (inputs.nativeFor(ffns[selected[0]].gate()) && inputs.nativeFor(ffns[selected[0]].up())) {
                gateUpNative(rows, nativeCalls[worker]);
                return;
            }
            int from = shareStart(selectedCount * rows, worker, workers);
            int to = shareStart(selectedCount * rows, worker + 1, workers);
            for (int unit = from; unit < to; unit++) {
                int e = selected[unit / rows];
                int r = unit % rows;
                GlmWeights.Ffn f = ffns[e];
                int[] slots = slotsOf[e];
                int i = 0;
                float[] g4 = quads[worker];
                float[] u4 = quads2[worker];
                for (; i + 4 <= slotCount[e]; i += 4) {
                    int s0 = slots[i];
                    int s1 = slots[i + 1];
                    int s2 = slots[i + 2];
                    int s3 = slots[i + 3];
                    inputs.dot4(f.gate(), r, s0 / k, s1 / k, s2 / k, s3 / k, g4);
                    inputs.dot4(f.up(), r, s0 / k, s1 / k, s2 / k, s3 / k, u4);
                    act[s0 * rows + r] = Backend.silu(g4[0]) * u4[0];
                    act[s1 * rows + r] = Backend.silu(g4[1]) * u4[1];
                    act[s2 * rows + r] = Backend.silu(g4[2]) * u4[2];
                    act[s3 * rows + r] = Backend.silu(g4[3]) * u4[3];
                }
                for (; i < slotCount[e]; i++) {
                    int slot = slots[i];
                    int t = slot / k;
                    float g = inputs.dot(f.gate(), r, t);
                    float u = inputs.dot(f.up(), r, t);
                    act[slot * rows + r] = Backend.silu(g) * u;
                }
            }
        }

        /**
         * The gate and up pass through the native kernel, ranges of (expert, row) units as this worker takes
         * them, each cut at experts and at what the worker's buffer holds: gate and up values side by side
         * in the buffer, then combined into {@code act}.
         */
        private void gateUpNative(int rows, NativeCall call) {
            call.tokens(n * k);
            call.values(2 * n * k);
            while (takeUnits(
                    selectedCount * rows, minUnits(2 * ffns[selected[0]].gate().rowBytes()), call.range)) {
                for (int unit = call.range[0]; unit < call.range[1]; ) {
                    int e = selected[unit / rows];
                    int count = slotCount[e];
                    int r0 = unit % rows;
                    int r1 = Math.min(
                            Math.min(rows, r0 + Math.max(1, NATIVE_VALUES / (2 * count))), r0 + call.range[1] - unit);
                    int len = r1 - r0;
                    int[] slots = slotsOf[e];
                    for (int i = 0; i < count; i++) {
                        call.xRows[i] = slots[i] / k;
                    }
                    call.multiply(ffns[e].gate(), r0, r1, inputs, count, 0);
                    call.multiply(ffns[e].up(), r0, r1, inputs, count, count * len);
                    for (int i = 0; i < count; i++) {
                        int at = slots[i] * rows;
                        for (int r = r0; r < r1; r++) {
                            act[at + r] = Backend.silu(call.values[i * len + r - r0])
                                    * call.values[(count + i) * len + r - r0];
                        }
                    }
                    unit += len;
                }
            }
        }

        /**
         * The down pass through the native kernel, ranges of output rows as this worker takes them, cut at
         * what the worker's buffer holds: each selected expert's values for its slots (at the slots'
         * places), then the weighted sums per token in slot order, as {@link #downRows} adds them.
         */
        private void downNative(int rows, NativeCall call) {
            int most = Math.max(1, NATIVE_VALUES / (n * k));
            call.tokens(n * k);
            call.values(n * k);
            long unitBytes = (long) selectedCount * ffns[selected[0]].down().rowBytes();
            while (takeUnits(rows, minUnits(unitBytes), call.range)) {
                for (int r0 = call.range[0]; r0 < call.range[1]; r0 += most) {
                    int r1 = Math.min(call.range[1], r0 + most);
                    int len = r1 - r0;
                    int place = 0;
                    for (int j = 0; j < selectedCount; j++) {
                        int e = selected[j];
                        int count = slotCount[e];
                        System.arraycopy(slotsOf[e], 0, call.xRows, 0, count);
                        call.multiply(ffns[e].down(), r0, r1, hidden, count, place * len);
                        place += count;
                    }
                    for (int t = 0; t < n; t++) {
                        for (int r = r0; r < r1; r++) {
                            float sum = 0;
                            for (int s = 0; s < k; s++) {
                                int slot = t * k + s;
                                float v = call.values[placeOf[slot] * len + r - r0] * weights[slot];
                                sum = s == 0 ? v : sum + v;
                            }
                            out[t * rows + r] = sum;
                        }
                    }
                }
            }
        }

        private void downRows(int worker, int workers) {
            int rows = ffns[selected[0]].down().rows();
            if (hidden.nativeFor(ffns[selected[0]].down())) {
                downNative(rows, nativeCalls[worker]);
                return;
            }
            int from = shareStart(rows, worker, workers);
            int to = shareStart(rows, worker + 1, workers);
            float[] values = slotValues[worker];
            float[] four = quads[worker];
            for (int r = from; r < to; r++) {
                for (int j = 0; j < selectedCount; j++) {
                    int e = selected[j];
                    WeightMatrix down = ffns[e].down();
                    int[] slots = slotsOf[e];
                    int i = 0;
                    for (; i + 4 <= slotCount[e]; i += 4) {
                        hidden.dot4(down, r, slots[i], slots[i + 1], slots[i + 2], slots[i + 3], four);
                        values[slots[i]] = four[0];
                        values[slots[i + 1]] = four[1];
                        values[slots[i + 2]] = four[2];
                        values[slots[i + 3]] = four[3];
                    }
                    for (; i < slotCount[e]; i++) {
                        values[slots[i]] = hidden.dot(down, r, slots[i]);
                    }
                }
                for (int t = 0; t < n; t++) {
                    float sum = 0;
                    for (int s = 0; s < k; s++) {
                        int slot = t * k + s;
                        float v = values[slot] * weights[slot];
                        sum = s == 0 ? v : sum + v;
                    }
                    out[t * rows + r] = sum;
                }
            }
        }
    }
}
