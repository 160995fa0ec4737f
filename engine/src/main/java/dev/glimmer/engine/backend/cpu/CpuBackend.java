package dev.glimmer.engine.backend.cpu;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.model.Backend;
import dev.glimmer.engine.model.GlmWeights;
import dev.glimmer.engine.model.WeightMatrix;
import dev.glimmer.engine.tensor.Dequantizer;

/**
 * The Java backend: SIMD kernels ({@link Kernels}) over weights read in place from the mapping, split
 * across a fixed pool of platform threads ({@link WorkerPool}), with the tensor package's llama.cpp
 * numerics. Weight types without a SIMD kernel use the tensor package's scalar dot products, still in
 * parallel. Every parallel operation hands its output rows (or tiles of 4 rows) to the threads in
 * chunks ({@link #claim}); a weight row is read from memory once per operation and stays in the L1
 * cache while it is dotted with every token of the batch that needs it. Groups of 16 tokens (a
 * prompt's dense weights, an expert chosen by 16 or more) go through {@link BatchKernels} with the
 * tokens in the vector lanes, the rest token by token through {@link Kernels}.
 *
 * <p>Not thread-safe (it keeps activation buffers and task objects, so that the decode path allocates
 * nothing): one instance per sequence being computed; instances share the worker threads.
 */
public final class CpuBackend implements Backend {
    /**
     * The fewest slots of an expert that go through the batch kernels as a last, padded group of 16
     * lanes: a group costs about as much as 8 tokens on the integer kernel (single thread, unpacking
     * included), whatever its lanes hold.
     */
    private static final int PADDED_GROUP = 8;
    /** Below this many multiply-adds an operation runs on the calling thread alone: the handoff would cost more. */
    private static final long PARALLEL_WORK = 32_768;

    private final WorkerPool pool;
    private final ActivationRows inputs = new ActivationRows();
    private final ActivationRows hidden = new ActivationRows();
    private final MatmulTask matmul = new MatmulTask();
    private final ExpertTask experts = new ExpertTask();
    private final CpuAttention attention;
    /** Per thread: 4 results of a {@link ActivationRows#dot4}, twice. */
    private final float[][] quads;
    private final float[][] quads2;
    /**
     * Per thread, for {@link BatchKernels}: two tiles of unpacked weight rows (gate and up), their
     * block scales, and two tiles of results (grown, never shrunk).
     */
    private final float[][] tileWeights;
    private final float[][] tileScales;
    private final float[][] tileResults;
    private final float[][] tileResults2;
    /** The next unit of the running operation to hand out ({@link #claim}). */
    private final java.util.concurrent.atomic.AtomicInteger nextUnit = new java.util.concurrent.atomic.AtomicInteger();
    /** The row indices 0, 1, 2, .. (grown), to gather lane groups of consecutive rows. */
    private int[] identity = new int[0];

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
        this.attention = new CpuAttention(pool);
        this.quads = new float[threads][4];
        this.quads2 = new float[threads][4];
        this.tileWeights = new float[threads][0];
        this.tileScales = new float[threads][0];
        this.tileResults = new float[threads][2 * BatchKernels.ROWS * BatchKernels.TOKENS];
        this.tileResults2 = new float[threads][2 * BatchKernels.ROWS * BatchKernels.TOKENS];
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

    @Override
    public void matmul(WeightMatrix w, float[] x, int xOff, int xStride, int n, float[] out, int outOff, int outStride) {
        inputs.reserve(w.type(), n, w.cols());
        inputs.set(w.type(), 0, x, xOff, xStride, n, w.cols());
        matmul.set(w, null, n, laneGroups(w, 1, n), out, outOff, 0, outStride);
        dispatch(matmul, (long) w.rows() * w.cols() * n);
    }

    /**
     * How many groups of 16 tokens of each of {@code heads} heads (activation rows {@code h*n + t})
     * go through {@link BatchKernels}, their lanes gathered (head h's group g is lane group
     * {@code h*groups + g}); 0 when the weights or the batch are not for them.
     */
    private int laneGroups(WeightMatrix w, int heads, int n) {
        int groups = n / BatchKernels.TOKENS;
        if (groups == 0 || !ActivationRows.usesLanes(w.type())) {
            return 0;
        }
        reserveTiles(w.cols());
        inputs.reserveLanes(heads * groups, w.cols());
        if (identity.length < heads * n) {
            identity = new int[heads * n];
            for (int i = 0; i < identity.length; i++) {
                identity[i] = i;
            }
        }
        for (int h = 0; h < heads; h++) {
            for (int g = 0; g < groups; g++) {
                inputs.gatherLanes(h * groups + g, identity, h * n + g * BatchKernels.TOKENS, BatchKernels.TOKENS, 1, w.cols());
            }
        }
        return groups;
    }

    /**
     * How many lane groups from {@code g} (of {@code groups}) one kernel call takes: two while two are
     * left (each broadcast weight then serves two fmas: a quarter faster per token), else one.
     */
    private static int lanesSpan(int g, int groups) {
        return g + 2 <= groups ? 2 : 1;
    }

    /** Makes room in every thread's weight tiles for rows of {@code cols} values. */
    private void reserveTiles(int cols) {
        if (tileWeights[0].length < 2 * BatchKernels.ROWS * cols) {
            for (int i = 0; i < tileWeights.length; i++) {
                tileWeights[i] = new float[2 * BatchKernels.ROWS * cols];
                tileScales[i] = new float[2 * BatchKernels.ROWS * cols / Kernels.QK];
            }
        }
    }

    /** Unpacks the {@link BatchKernels#ROWS} rows from {@code r} of {@code w} into tile {@code tile} of {@code worker}. */
    private void unpackTile(WeightMatrix w, int r, int worker, int tile) {
        int cols = w.cols();
        int blocks = cols / Kernels.QK;
        for (int i = 0; i < BatchKernels.ROWS; i++) {
            int row = tile * BatchKernels.ROWS + i;
            BatchKernels.unpackQ4_0(w.data(), (r + i) * w.rowBytes(), blocks, tileWeights[worker], row * cols,
                    tileScales[worker], row * blocks);
        }
    }

    /**
     * One operation for all heads: the activation rows of every head are converted first (row
     * {@code h*n + t}), then the (head, row) pairs are split among the threads.
     */
    @Override
    public void matmulHeads(WeightMatrix[] w, float[] x, int xOff, int xHeadStride, int xStride, int n,
                            float[] out, int outOff, int outHeadStride, int outStride) {
        WeightMatrix first = w[0];
        inputs.reserve(first.type(), w.length * n, first.cols());
        for (int h = 0; h < w.length; h++) {
            inputs.set(first.type(), h * n, x, xOff + h * xHeadStride, xStride, n, first.cols());
        }
        matmul.set(null, w, n, laneGroups(first, w.length, n), out, outOff, outHeadStride, outStride);
        dispatch(matmul, (long) w.length * first.rows() * first.cols() * n);
    }

    @Override
    public void expertFfn(GlmWeights.Ffn[] ffns, int[] chosen, float[] weights, int k, float[] x, int n,
                          float[] act, float[] out) {
        experts.compute(ffns, chosen, weights, k, x, n, act, out);
    }

    @Override
    public void attention(KvCache cache, int layer, float[] q, int n, int firstPosition, int heads, float scale,
                          int valueWidth, float[] out) {
        attention.compute(cache, layer, q, n, firstPosition, heads, scale, valueWidth, out);
    }

    private void dispatch(WorkerPool.Task task, long work) {
        nextUnit.set(0);
        if (work < PARALLEL_WORK) {
            task.run(0, 1);
        } else {
            pool.run(task);
        }
    }

    /**
     * The first of the next {@code chunk} units of the running operation for the calling thread to
     * compute (at or past the operation's unit count: none left). The threads take chunks of their
     * operation's units from this one counter until none are left, rather than a fixed share each:
     * units differ in cost (an expert's rows cost as many tokens as chose it) and a thread of a busy
     * machine may lose its core for a while; either way the others take on the rest. Each unit is
     * computed the same way whichever thread takes it, so results do not depend on the split.
     */
    private int claim(int chunk) {
        return nextUnit.getAndAdd(chunk);
    }

    /** Units per {@link #claim}: about 16 chunks per thread, so that the last ones even out. */
    private static int chunk(int units, int workers) {
        return Math.max(1, units / (16 * workers));
    }

    /**
     * A matmul, or one matmul per head (head h: weights {@code heads[h]}, activation rows {@code h*n + t},
     * output at {@code outOff + h*outHeadStride}); the units split among threads are (head, row) pairs,
     * in tiles of {@link BatchKernels#ROWS} rows when groups of 16 tokens go through the batch kernels
     * (the rest of the tokens, fewer than 16, row by row).
     */
    private final class MatmulTask implements WorkerPool.Task {
        private WeightMatrix single;
        private WeightMatrix[] heads;
        private int n;
        private int groups;
        private float[] out;
        private int outOff;
        private int outHeadStride;
        private int outStride;

        void set(WeightMatrix single, WeightMatrix[] heads, int n, int groups, float[] out, int outOff, int outHeadStride, int outStride) {
            this.single = single;
            this.heads = heads;
            this.n = n;
            this.groups = groups;
            this.out = out;
            this.outOff = outOff;
            this.outHeadStride = outHeadStride;
            this.outStride = outStride;
        }

        @Override
        public void run(int worker, int workers) {
            int rows = single != null ? single.rows() : heads[0].rows();
            int count = single != null ? 1 : heads.length;
            int perUnit = groups > 0 ? BatchKernels.ROWS : 1;
            int unitsPerHead = (rows + perUnit - 1) / perUnit;
            int units = count * unitsPerHead;
            int chunk = chunk(units, workers);
            for (int from = claim(chunk); from < units; from = claim(chunk)) {
                for (int unit = from; unit < Math.min(from + chunk, units); unit++) {
                    matmulUnit(unit, unitsPerHead, perUnit, rows, worker);
                }
            }
        }

        /** Unit {@code unit}: {@code perUnit} rows (fewer at a head's end) of one head, every token. */
        private void matmulUnit(int unit, int unitsPerHead, int perUnit, int rows, int worker) {
            int h = unit / unitsPerHead;
            int r = unit % unitsPerHead * perUnit;
            int unitRows = Math.min(perUnit, rows - r);
            WeightMatrix w = single != null ? single : heads[h];
            int o = outOff + h * outHeadStride + r;
            int t0 = 0;
            if (groups > 0 && unitRows == BatchKernels.ROWS) {
                unpackTile(w, r, worker, 0);
                float[] result = tileResults[worker];
                for (int g = 0; g < groups; g += lanesSpan(g, groups)) {
                    int span = lanesSpan(g, groups);
                    inputs.dotLanes(tileWeights[worker], 0, tileScales[worker], 0, w.cols(), h * groups + g, span, result);
                    for (int i = 0; i < BatchKernels.ROWS; i++) {
                        for (int l = 0; l < span * BatchKernels.TOKENS; l++) {
                            out[o + i + (g * BatchKernels.TOKENS + l) * outStride] = result[i * span * BatchKernels.TOKENS + l];
                        }
                    }
                }
                t0 = groups * BatchKernels.TOKENS;
            }
            for (int i = 0; i < unitRows; i++) {
                rowTokens(w, h, r + i, o + i, t0, worker);
            }
        }

        /** Row {@code r} of {@code w} (head h) for tokens {@code t0 ..} of the batch, row by row, into {@code out[o + t*outStride]}. */
        private void rowTokens(WeightMatrix w, int h, int r, int o, int t0, int worker) {
            int t = t0;
            float[] four = quads[worker];
            for (; t + 4 <= n; t += 4) {
                int i = h * n + t;
                inputs.dot4(w, r, i, i + 1, i + 2, i + 3, four);
                for (int j = 0; j < 4; j++) {
                    out[o + (t + j) * outStride] = four[j];
                }
            }
            if (t + 2 <= n) {
                int i = h * n + t;
                inputs.dot2(w, r, i, i + 1, four);
                out[o + t * outStride] = four[0];
                out[o + (t + 1) * outStride] = four[1];
                t += 2;
            }
            for (; t < n; t++) {
                out[o + t * outStride] = inputs.dot(w, r, h * n + t);
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
     *   <li>down: the units are (selected expert, row) pairs again, so that each thread reads a run of
     *       each expert's matrix front to back (the memory prefetcher follows one stream, not one per
     *       expert); each unit computes the row's {@code down_e · act} for every slot of the expert (the
     *       row unpacked once for up to four of them) into the slot's row of values;</li>
     *   <li>then, on the calling thread, per token and output row, its slots' {@code weight · value}
     *       summed in slot order (as llama.cpp adds the slots).</li>
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
        /**
         * Per expert, how many groups of 16 of its slots go through the batch kernels, and the lane group
         * of the first (the same index in {@code inputs} and {@code hidden}); and their total.
         */
        private int[] laneGroupsOf = new int[0];
        private int[] firstLaneGroup = new int[0];
        private int laneGroupCount;
        /** The down projection of every slot: {@code slotValues[slot * rows + r]} (grown, never shrunk). */
        private float[] slotValues = new float[0];

        void compute(GlmWeights.Ffn[] ffns, int[] chosen, float[] weights, int k, float[] x, int n, float[] act, float[] out) {
            this.ffns = ffns;
            this.chosen = chosen;
            this.weights = weights;
            this.k = k;
            this.n = n;
            this.act = act;
            this.out = out;
            group();
            GlmWeights.Ffn any = ffns[selected[0]];
            int hiddenWidth = any.gate().rows();
            int width = any.gate().cols();
            inputs.reserve(any.gate().type(), n, width);
            inputs.set(any.gate().type(), 0, x, 0, width, n, width);
            assignLaneGroups(any);
            for (int j = 0; j < selectedCount; j++) {
                int e = selected[j];
                for (int g = 0; g < laneGroupsOf[e]; g++) {
                    inputs.gatherLanes(firstLaneGroup[e] + g, slotsOf[e], g * BatchKernels.TOKENS, laneCount(e, g), k, width);
                }
            }
            down = false;
            dispatch(this, 2L * n * k * hiddenWidth * width);
            hidden.reserve(any.down().type(), n * k, hiddenWidth);
            hidden.set(any.down().type(), 0, act, 0, hiddenWidth, n * k, hiddenWidth);
            if (laneGroupCount > 0) {
                hidden.reserveLanes(laneGroupCount, hiddenWidth);
                for (int j = 0; j < selectedCount; j++) {
                    int e = selected[j];
                    for (int g = 0; g < laneGroupsOf[e]; g++) {
                        hidden.gatherLanes(firstLaneGroup[e] + g, slotsOf[e], g * BatchKernels.TOKENS, laneCount(e, g), 1, hiddenWidth);
                    }
                }
            }
            if (slotValues.length < n * k * width) {
                slotValues = new float[n * k * width];
            }
            down = true;
            dispatch(this, (long) n * k * hiddenWidth * width);
            weightedSum(width);
            this.ffns = null;
            this.act = null;
            this.out = null;
        }

        /**
         * Gives each selected expert with 16 or more slots its lane groups (when its weights suit the batch
         * kernels: Q4_0 gate, up and down) and makes room for them.
         */
        private void assignLaneGroups(GlmWeights.Ffn any) {
            if (laneGroupsOf.length < ffns.length) {
                laneGroupsOf = new int[ffns.length];
                firstLaneGroup = new int[ffns.length];
            }
            boolean lanes = ActivationRows.usesLanes(any.gate().type()) && ActivationRows.usesLanes(any.up().type())
                    && ActivationRows.usesLanes(any.down().type());
            laneGroupCount = 0;
            for (int j = 0; j < selectedCount; j++) {
                int e = selected[j];
                int left = slotCount[e] % BatchKernels.TOKENS;
                laneGroupsOf[e] = !lanes ? 0 : slotCount[e] / BatchKernels.TOKENS + (left >= PADDED_GROUP ? 1 : 0);
                firstLaneGroup[e] = laneGroupCount;
                laneGroupCount += laneGroupsOf[e];
            }
            if (laneGroupCount > 0) {
                inputs.reserveLanes(laneGroupCount, any.gate().cols());
                reserveTiles(Math.max(any.gate().cols(), any.down().cols()));
            }
        }

        /** Slots of expert {@code e} in its lane group {@code g}: 16, or fewer in a padded last group. */
        private int laneCount(int e, int g) {
            return Math.min(BatchKernels.TOKENS, slotCount[e] - g * BatchKernels.TOKENS);
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
            int perUnit = laneGroupCount > 0 ? BatchKernels.ROWS : 1;
            int unitsPerExpert = (rows + perUnit - 1) / perUnit;
            int units = selectedCount * unitsPerExpert;
            int chunk = chunk(units, workers);
            for (int from = claim(chunk); from < units; from = claim(chunk)) {
                for (int unit = from; unit < Math.min(from + chunk, units); unit++) {
                    gateUpUnit(unit, unitsPerExpert, perUnit, rows, worker);
                }
            }
        }

        private void gateUpUnit(int unit, int unitsPerExpert, int perUnit, int rows, int worker) {
            int e = selected[unit / unitsPerExpert];
            int r = unit % unitsPerExpert * perUnit;
            int unitRows = Math.min(perUnit, rows - r);
            GlmWeights.Ffn f = ffns[e];
            int first = 0;
            if (laneGroupsOf[e] > 0 && unitRows == BatchKernels.ROWS) {
                int cols = f.gate().cols();
                unpackTile(f.gate(), r, worker, 0);
                unpackTile(f.up(), r, worker, 1);
                float[] g16 = tileResults[worker];
                float[] u16 = tileResults2[worker];
                for (int g = 0; g < laneGroupsOf[e]; g += lanesSpan(g, laneGroupsOf[e])) {
                    int span = lanesSpan(g, laneGroupsOf[e]);
                    inputs.dotLanes(tileWeights[worker], 0, tileScales[worker], 0, cols, firstLaneGroup[e] + g, span, g16);
                    inputs.dotLanes(tileWeights[worker], BatchKernels.ROWS * cols, tileScales[worker],
                            BatchKernels.ROWS * cols / Kernels.QK, cols, firstLaneGroup[e] + g, span, u16);
                    for (int l = 0; l < Math.min(span * BatchKernels.TOKENS, slotCount[e] - g * BatchKernels.TOKENS); l++) {
                        int slot = slotsOf[e][g * BatchKernels.TOKENS + l];
                        for (int i = 0; i < BatchKernels.ROWS; i++) {
                            int at = i * span * BatchKernels.TOKENS + l;
                            act[slot * rows + r + i] = Backend.silu(g16[at]) * u16[at];
                        }
                    }
                }
                first = Math.min(laneGroupsOf[e] * BatchKernels.TOKENS, slotCount[e]);
            }
            for (int i = 0; i < unitRows; i++) {
                gateUpSlots(f, e, r + i, rows, first, worker);
            }
        }

        /** Gate and up row {@code r} of expert {@code e} for its slots from {@code first}, row by row. */
        private void gateUpSlots(GlmWeights.Ffn f, int e, int r, int rows, int first, int worker) {
            int[] slots = slotsOf[e];
            int i = first;
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
            if (i + 2 <= slotCount[e]) {
                int s0 = slots[i];
                int s1 = slots[i + 1];
                inputs.dot2(f.gate(), r, s0 / k, s1 / k, g4);
                inputs.dot2(f.up(), r, s0 / k, s1 / k, u4);
                act[s0 * rows + r] = Backend.silu(g4[0]) * u4[0];
                act[s1 * rows + r] = Backend.silu(g4[1]) * u4[1];
                i += 2;
            }
            for (; i < slotCount[e]; i++) {
                int slot = slots[i];
                int t = slot / k;
                float g = inputs.dot(f.gate(), r, t);
                float u = inputs.dot(f.up(), r, t);
                act[slot * rows + r] = Backend.silu(g) * u;
            }
        }

        private void downRows(int worker, int workers) {
            int rows = ffns[selected[0]].down().rows();
            int perUnit = laneGroupCount > 0 ? BatchKernels.ROWS : 1;
            int unitsPerExpert = (rows + perUnit - 1) / perUnit;
            int units = selectedCount * unitsPerExpert;
            int chunk = chunk(units, workers);
            for (int from = claim(chunk); from < units; from = claim(chunk)) {
                for (int unit = from; unit < Math.min(from + chunk, units); unit++) {
                    downUnit(unit, unitsPerExpert, perUnit, rows, worker);
                }
            }
        }

        private void downUnit(int unit, int unitsPerExpert, int perUnit, int rows, int worker) {
            int e = selected[unit / unitsPerExpert];
            int r = unit % unitsPerExpert * perUnit;
            int unitRows = Math.min(perUnit, rows - r);
            WeightMatrix down = ffns[e].down();
            int first = 0;
            if (laneGroupsOf[e] > 0 && unitRows == BatchKernels.ROWS) {
                unpackTile(down, r, worker, 0);
                float[] d16 = tileResults[worker];
                for (int g = 0; g < laneGroupsOf[e]; g += lanesSpan(g, laneGroupsOf[e])) {
                    int span = lanesSpan(g, laneGroupsOf[e]);
                    hidden.dotLanes(tileWeights[worker], 0, tileScales[worker], 0, down.cols(), firstLaneGroup[e] + g, span, d16);
                    for (int l = 0; l < Math.min(span * BatchKernels.TOKENS, slotCount[e] - g * BatchKernels.TOKENS); l++) {
                        int slot = slotsOf[e][g * BatchKernels.TOKENS + l];
                        for (int i = 0; i < BatchKernels.ROWS; i++) {
                            slotValues[slot * rows + r + i] = d16[i * span * BatchKernels.TOKENS + l];
                        }
                    }
                }
                first = Math.min(laneGroupsOf[e] * BatchKernels.TOKENS, slotCount[e]);
            }
            for (int i = 0; i < unitRows; i++) {
                downSlots(down, e, r + i, rows, first, worker);
            }
        }

        /** Down row {@code r} of expert {@code e} for its slots from {@code first}, row by row. */
        private void downSlots(WeightMatrix down, int e, int r, int rows, int first, int worker) {
            int[] slots = slotsOf[e];
            float[] four = quads[worker];
            int i = first;
            for (; i + 4 <= slotCount[e]; i += 4) {
                hidden.dot4(down, r, slots[i], slots[i + 1], slots[i + 2], slots[i + 3], four);
                slotValues[slots[i] * rows + r] = four[0];
                slotValues[slots[i + 1] * rows + r] = four[1];
                slotValues[slots[i + 2] * rows + r] = four[2];
                slotValues[slots[i + 3] * rows + r] = four[3];
            }
            if (i + 2 <= slotCount[e]) {
                hidden.dot2(down, r, slots[i], slots[i + 1], four);
                slotValues[slots[i] * rows + r] = four[0];
                slotValues[slots[i + 1] * rows + r] = four[1];
                i += 2;
            }
            for (; i < slotCount[e]; i++) {
                slotValues[slots[i] * rows + r] = hidden.dot(down, r, slots[i]);
            }
        }

        /** Per token and output row, its slots' {@code weight · value} summed in slot order (as llama.cpp adds the slots). */
        private void weightedSum(int rows) {
            for (int t = 0; t < n; t++) {
                for (int r = 0; r < rows; r++) {
                    float sum = 0;
                    for (int s = 0; s < k; s++) {
                        int slot = t * k + s;
                        float v = slotValues[slot * rows + r] * weights[slot];
                        sum = s == 0 ? v : sum + v;
                    }
                    out[t * rows + r] = sum;
                }
            }
        }
    }
}
