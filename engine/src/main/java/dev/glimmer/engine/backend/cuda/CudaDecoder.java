package dev.glimmer.engine.backend.cuda;

import dev.glimmer.engine.backend.GpuTokenDecoder;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.SequenceSlots;
import dev.glimmer.engine.backend.KernelTimings.KernelTime;
import dev.glimmer.engine.backend.KernelTimings.Profile;
import dev.glimmer.engine.backend.emulated.DecodeModels;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.kernels.ArgStruct;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.decode.BufferSpec;
import dev.glimmer.kernels.decode.CommandList;
import dev.glimmer.kernels.decode.DecodeCommandListBuilder;
import dev.glimmer.kernels.decode.DecodeModel;
import dev.glimmer.kernels.decode.Dispatch;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Sequences of one model on a CUDA device sharing a KV pool: every layer's KV buffer holds {@code slots}
 * ranges of {@code contextSize} rows, one per sequence ({@link #open}). The decode {@link CommandList}, the
 * prompt command list and the batch decode lists (the ones a Metal indirect command buffer encodes) are each
 * captured once into a CUDA graph over the model's {@link CudaWeights}, the pool and each list's own
 * activations and argument structs in device memory: activations belong to the model, not to each
 * conversation. Per run the host writes the {@code StepArgs} (token, position, KV length and the sequence's
 * first KV row; one per token of a batch) with an ordered copy, launches the graph and reads back the logits
 * or only the greedy tokens. One sequence steps through the decode graph; several at once
 * ({@link #step(List, int[], boolean[])}) through the smallest batch graph that holds them, which reads each
 * dense weight once and each chosen expert once for all of them.
 *
 * <p>Not thread-safe: one caller at a time (it makes the device's context current on whatever thread calls it).
 */
public final class CudaDecoder implements AutoCloseable {

    private final CudaDevice device;
    private final CudaDriver driver;
    private final CudaKernels kernels;
    private final int contextSize;
    private final int vocab;
    /** Rows of the token embedding table: the token ids a run may hold. */
    private final int embeddingRows;
    private final ArgStruct stepArgs;
    private final Arena arena = Arena.ofShared();
    private final Graph decode;
    private final Graph prompt;
    /** Batch decode graphs of 2, 4, 8, ... rows, up to the pool's slots (at most {@link Geometry#BATCH_MAX_ROWS}). */
    private final List<Graph> batches;
    private final MemorySegment stream;
    /** Host staging of the StepArgs of the largest batch. */
    private final MemorySegment stepBytes;
    /** Pinned host memory the run's logits or greedy tokens are copied into on the run's stream. */
    private final MemorySegment readBack;
    /** Where in {@link #readBack} a step's greedy tokens go: after the logits of as many rows as a graph outputs. */
    private final long tokensAt;
    /** Each slot's logits as handed out, reused from run to run. */
    private final float[][] logits;
    /** Which slots an open sequence holds. */
    private final SequenceSlots<Sequence> open;
    /** The graph that ran last: its argmax holds the greedy token. */
    private Graph last;

    /** Where a run's result goes: nowhere, the logits, or the greedy token. */
    private enum ReadBack { NOTHING, LOGITS, TOKEN }
    /** One command list in device memory and its captured graph. */
    private final class Graph {
        final CommandList list;
        final long[] buffers;
        /** Which buffers this graph allocated (the weights belong to {@link CudaWeights}, a shared KV cache to the other graph). */
        final boolean[] owned;
        final long[][] bindings;
        final long deviceBytes;
        MemorySegment exec;

        /** Allocates {@code list}'s buffers; its KV cache buffers are {@code shared}'s where given. */
        Graph(CommandList list, CudaWeights weights, Graph shared) {
            this.list = list;
            buffers = new long[list.buffers().size()];
            owned = new boolean[buffers.length];
            long total = 0;
            try {
                for (int i = 0; i < buffers.length; i++) {
                    BufferSpec b = list.buffers().get(i);
                    if (b.kind() == BufferSpec.Kind.WEIGHTS) {
                        buffers[i] = weights.pointer(b);
                    } else if (b.kind() == BufferSpec.Kind.KV_CACHE && shared != null) {
                        buffers[i] = shared.buffers[shared.list.buffers().indexOf(b)];
                    } else {
                        buffers[i] = driver.alloc(b.bytes());
                        owned[i] = true;
                        total += Math.max(1, b.bytes());
                        if (b.kind() == BufferSpec.Kind.ARGS) {
                            driver.copyToDevice(buffers[i], arena.allocateFrom(ValueLayout.JAVA_BYTE, list.args()),
                                    list.args().length);
                        } else {
                            driver.memset(buffers[i], (byte) 0, Math.max(1, b.bytes()));
                        }
                    }
                }
            } catch (RuntimeException e) {
                free();
                throw e;
            }
            this.deviceBytes = total;
            bindings = new long[list.dispatches().size()][];
            for (int d = 0; d < bindings.length; d++) {
                List<Dispatch.Binding> bs = list.dispatches().get(d).bindings();
                bindings[d] = new long[bs.size()];
                for (Dispatch.Binding b : bs) {
                    bindings[d][b.index()] = buffers[b.buffer()] + b.offset();
                }
            }
        }

        void capture(MemorySegment stream) {
            exec = capture(stream, new boolean[bindings.length]);
        }

        /** A graph of the list's dispatches but those marked in {@code skip} (for profiling); the caller destroys it. */
        MemorySegment capture(MemorySegment stream, boolean[] skip) {
            driver.beginCapture(stream);
            for (int d = 0; d < bindings.length; d++) {
                if (!skip[d]) {
                    enqueue(stream, d);
                }
            }
            return driver.endCaptureAndInstantiate(stream);
        }

        /** Dispatch {@code d} on the stream. */
        void enqueue(MemorySegment stream, int d) {
            Dispatch dispatch = list.dispatches().get(d);
            kernels.launch(dispatch.kernel(), stream, dispatch.grid(), dispatch.threads(), bindings[d],
                    dispatch.threadgroupMemory());
        }

        long activations() {
            return buffers[list.buffer(BufferSpec.Kind.ACTIVATIONS)];
        }

        /** Writes the StepArgs of {@code rows}; the rest of the batch gets none (kv_len 0). */
        void writeSteps(List<CommandList.StepRow> rows) {
            byte[] b = list.steps(stepArgs, rows);
            MemorySegment.copy(b, 0, stepBytes, ValueLayout.JAVA_BYTE, 0, b.length);
            driver.copyToDeviceAsync(buffers[list.buffer(BufferSpec.Kind.STEP)], stepBytes, b.length, stream);
        }

        void free() {
            if (exec != null) {
                driver.destroyGraph(exec);
                exec = null;
            }
            for (int i = 0; i < buffers.length; i++) {
                if (owned[i] && buffers[i] != 0) {
                    driver.free(buffers[i]);
                    buffers[i] = 0;
                }
            }
        }
    }

    /** A pool of one sequence (tests, the self-test). */
    public CudaDecoder(CudaWeights weights, int contextSize) {
        this(weights, contextSize, 1);
    }

    /**
     * {@code slots} sequences of at most {@code contextSize} positions over uploaded {@code weights}; captures the
     * decode graph, the prompt graph (batches of {@link Geometry#PROMPT_TOKENS}) and the batch decode graphs.
     */
    public CudaDecoder(CudaWeights weights, int contextSize, int slots) {
        GlmModel model = weights.model();
        this.kernels = weights.kernels();
        this.device = kernels.device();
        this.driver = device.driver();
        this.contextSize = contextSize;
        this.vocab = model.vocabSize();
        this.embeddingRows = model.weights().tokenEmbedding().rows();
        this.stepArgs = kernels.library().struct("StepArgs");
        this.open = new SequenceSlots<>(slots, contextSize);
        DecodeModel shape = DecodeModels.of(model.file(), model.config());
        long kvRows = (long) slots * contextSize;
        CommandList decodeList = DecodeCommandListBuilder.build(shape, kvRows);
        CommandList promptList = DecodeCommandListBuilder.build(shape, kvRows, Geometry.PROMPT_TOKENS);
        List<CommandList> batchLists = new ArrayList<>();
        for (int rows : Geometry.batchSizes(slots)) {
            batchLists.add(DecodeCommandListBuilder.batch(shape, kvRows, rows));
        }
        int maxOutputs = batchLists.isEmpty() ? 1 : batchLists.getLast().outputs();
        device.makeCurrent();
        List<Graph> made = new ArrayList<>();
        MemorySegment s = null;
        MemorySegment host = null;
        // Everything this decoder allocates is allocated here, so that a failure frees what came before it.
        try {
            Graph d = new Graph(decodeList, weights, null);
            made.add(d);
            made.add(new Graph(promptList, weights, d));
            for (CommandList b : batchLists) {
                made.add(new Graph(b, weights, d));
            }
            s = driver.newStream();
            for (Graph g : made) {
                g.capture(s);
            }
            stepBytes = arena.allocate((long) Math.max(promptList.tokens(), maxOutputs) * stepArgs.size());
            // every output row's logits, then their greedy tokens
            host = driver.allocHost(4L * vocab * maxOutputs + 4L * maxOutputs);
            tokensAt = 4L * vocab * maxOutputs;
            logits = new float[slots][];
        } catch (RuntimeException | OutOfMemoryError e) {
            if (host != null) {
                driver.freeHost(host);
            }
            for (Graph g : made) {
                g.free();
            }
            if (s != null) {
                driver.destroyStream(s);
            }
            arena.close();
            throw e;
        }
        this.decode = made.get(0);
        this.prompt = made.get(1);
        this.batches = List.copyOf(made.subList(2, made.size()));
        this.stream = s;
        this.readBack = host;
        this.last = decode;
    }

    /** A sequence on a free slot of the pool, at position 0; closing it frees the slot. */
    public Sequence open() {
        return open.open(Sequence::new);
    }

    /** Sequences the pool holds at most. */
    public int slots() {
        return open.size();
    }

    /** Sequences open now. */
    public int inUse() {
        return open.inUse();
    }

    /** Device memory of one slot of the KV pool: what one more cached conversation costs. */
    public long kvBytesPerSequence() {
        return decode.list.buffers().stream().filter(b -> b.kind() == BufferSpec.Kind.KV_CACHE)
                .mapToLong(BufferSpec::bytes).sum() / open.size();
    }

    /** The decode step's command list. */
    public CommandList commandList() {
        return decode.list;
    }

    /** Device memory the pool allocated: the KV pool, the activations and arguments of every graph. */
    public long deviceBytes() {
        long total = decode.deviceBytes + prompt.deviceBytes;
        for (Graph g : batches) {
            total += g.deviceBytes;
        }
        return total;
    }

    public int contextSize() {
        return contextSize;
    }

    /** Tokens of one prompt batch. */
    public int promptBatch() {
        return prompt.list.tokens();
    }

    /** The greedy token the last run's argmax dispatch chose (the first row's, after a batch step). */
    public int greedyToken() {
        device.makeCurrent();
        return readBackToken(last, 0);
    }

    /**
     * One decode step of several open sequences: {@code tokens[i]} goes into {@code sequences.get(i)} (distinct
     * sequences of this pool) at its next position, and row i gives back what {@code readouts[i]} asks (logits in an
     * array its slot reuses, valid until its next run). A single sequence runs the decode graph; more run the smallest
     * batch graph that holds them (more than the largest: in turns of it).
     */
    public SequencePool.Next[] step(List<Sequence> sequences, int[] tokens, SequencePool.Readout[] readouts) {
        checkStep(sequences, tokens);
        int n = sequences.size();
        SequencePool.Next[] out = new SequencePool.Next[n];
        int max = maxRows();
        for (int first = 0; first < n; first += max) {
            int rows = Math.min(max, n - first);
            SequencePool.Next[] turn = launchRows(sequences.subList(first, first + rows),
                    Arrays.copyOfRange(tokens, first, first + rows), Arrays.copyOfRange(readouts, first, first + rows))
                    .results();
            System.arraycopy(turn, 0, out, first, rows);
        }
        return out;
    }

    /**
     * The step {@link #step} describes, queued on the device: this returns once its graph and the copies of its results
     * are on the stream, and {@link SequencePool.Launched#results} waits for them (until then nothing else may run on
     * this decoder). More sequences than the largest batch graph holds run here and now, in turns.
     */
    public SequencePool.Launched launch(List<Sequence> sequences, int[] tokens, SequencePool.Readout[] readouts) {
        if (sequences.size() > maxRows()) {
            SequencePool.Next[] out = step(sequences, tokens, readouts);
            return () -> out;
        }
        checkStep(sequences, tokens);
        return launchRows(sequences, tokens, readouts);
    }

    /** Rows one graph runs at most: the largest batch graph's, or the decode graph's one where the pool has no batch. */
    private int maxRows() {
        return batches.isEmpty() ? 1 : batches.getLast().list.tokens();
    }

    private void checkStep(List<Sequence> sequences, int[] tokens) {
        for (int i = 0; i < sequences.size(); i++) {
            Sequence q = sequences.get(i);
            q.checkOpen();
            for (int j = 0; j < i; j++) {
                if (sequences.get(j) == q) {
                    throw new IllegalArgumentException("sequence " + i + " appears twice in one step");
                }
            }
            GpuTokenDecoder.checkRun(tokens, i, 1, q.position(), contextSize, embeddingRows);
        }
    }

    /**
     * Queues one step of {@code sequences} (at most {@link #maxRows}) through the decode graph (one row) or the smallest
     * batch graph that holds them, and after it the copies of every row's greedy token and of the logits of the rows
     * that ask for them into {@link #readBack}; the returned results synchronize once and read them.
     */
    private SequencePool.Launched launchRows(List<Sequence> sequences, int[] tokens, SequencePool.Readout[] readouts) {
        int rows = sequences.size();
        Graph graph = rows == 1 ? decode
                : batches.stream().filter(g -> g.list.tokens() >= rows).findFirst().orElseThrow();
        List<CommandList.StepRow> steps = new ArrayList<>(rows);
        for (int i = 0; i < rows; i++) {
            steps.add(sequences.get(i).nextRow(tokens[i]));
        }
        device.makeCurrent();
        graph.writeSteps(steps);
        driver.launchGraph(graph.exec, stream);
        driver.copyToHostAsync(readBack.asSlice(tokensAt), graph.activations() + graph.list.token(), 4L * rows, stream);
        for (int i = 0; i < rows; i++) {
            if (!readouts[i].greedy()) {
                driver.copyToHostAsync(readBack.asSlice(4L * vocab * i),
                        graph.activations() + graph.list.logits() + 4L * vocab * i, 4L * vocab, stream);
            }
        }
        last = graph;
        return () -> {
            device.makeCurrent();
            driver.synchronize(stream);
            SequencePool.Next[] out = new SequencePool.Next[rows];
            for (int i = 0; i < rows; i++) {
                Sequence q = sequences.get(i);
                int greedy = readBack.get(ValueLayout.JAVA_INT, tokensAt + 4L * i);
                if (!readouts[i].greedy()) {
                    float[] logits = q.logits();
                    MemorySegment.copy(readBack, ValueLayout.JAVA_FLOAT, 4L * vocab * i, logits, 0, vocab);
                    out[i] = SequencePool.Next.of(logits);
                } else if (readouts[i].takes(greedy)) {
                    out[i] = SequencePool.Next.greedy(greedy);
                }
                q.advance(1);
            }
            // the rare greedy row whose first maximum is a banned token: its logits (the read-back's first row is free now)
            for (int i = 0; i < rows; i++) {
                if (out[i] == null) {
                    out[i] = SequencePool.Next.of(readLogits(graph, i, sequences.get(i)));
                }
            }
            return out;
        };
    }

    /** Row {@code row}'s logits of the last run of {@code graph}, into the array {@code q}'s slot reuses. */
    private float[] readLogits(Graph graph, int row, Sequence q) {
        driver.copyToHostAsync(readBack, graph.activations() + graph.list.logits() + 4L * vocab * row, 4L * vocab, stream);
        driver.synchronize(stream);
        float[] logits = q.logits();
        MemorySegment.copy(readBack, ValueLayout.JAVA_FLOAT, 0, logits, 0, vocab);
        return logits;
    }

    private int readBackToken(Graph graph, int row) {
        driver.copyToHostAsync(readBack, graph.activations() + graph.list.token() + 4L * row, 4, stream);
        driver.synchronize(stream);
        return readBack.get(ValueLayout.JAVA_INT, 0);
    }

    /**
     * One sequence of the pool: its slot's range of the KV buffers and its position (see {@link SequenceSlots}).
     */
    public final class Sequence extends SequenceSlots.Slot {
        private final int slot;

        private Sequence(int slot) {
            super(open, slot);
            this.slot = slot;
        }

        private float[] logits() {
            if (logits[slot] == null) {
                logits[slot] = new float[vocab];
            }
            return logits[slot];
        }

        /**
         * Runs one decode step for {@code token}; returns the logits in an array this slot reuses (valid
         * until its next run). They come back with the step: copied on its stream into pinned memory.
         */
        public float[] step(int tokenId) {
            check(new int[] {tokenId}, 0, 1, position());
            run(decode, new int[] {tokenId}, 0, 1, ReadBack.LOGITS);
            return logits();
        }

        /** Runs one decode step for {@code token} and returns only the greedy next token (4 bytes read back). */
        public int stepGreedy(int tokenId) {
            check(new int[] {tokenId}, 0, 1, position());
            run(decode, new int[] {tokenId}, 0, 1, ReadBack.TOKEN);
            return readBack.get(ValueLayout.JAVA_INT, 0);
        }

        /**
         * Runs {@code tokens[from .. from+count)} through the prompt graph, {@link Geometry#PROMPT_TOKENS} at a
         * time, and returns the logits after the last of them (the array {@link #step} reuses).
         */
        public float[] prompt(int[] tokens, int from, int count) {
            runPrompt(tokens, from, count, ReadBack.LOGITS);
            return logits();
        }

        /** The prompt as {@link #prompt}, returning only the greedy next token. */
        public int promptGreedy(int[] tokens, int from, int count) {
            runPrompt(tokens, from, count, ReadBack.TOKEN);
            return readBack.get(ValueLayout.JAVA_INT, 0);
        }

        private void runPrompt(int[] tokens, int from, int count, ReadBack result) {
            check(tokens, from, count, position());
            int batch = prompt.list.tokens();
            for (int done = 0; done < count; done += batch) {
                int n = Math.min(batch, count - done);
                run(prompt, tokens, from + done, n, done + n == count ? result : ReadBack.NOTHING);
            }
        }

        /**
         * Writes the StepArgs of {@code count} tokens at the next positions, launches {@code graph} and, after it
         * on the same stream, copies its {@code result} into {@link #readBack}; one synchronization waits for all.
         */
        private void run(Graph graph, int[] tokens, int from, int count, ReadBack result) {
            device.makeCurrent();
            graph.writeSteps(rows(tokens, from, count, position()));
            driver.launchGraph(graph.exec, stream);
            switch (result) {
                case LOGITS -> driver.copyToHostAsync(readBack, graph.activations() + graph.list.logits(), 4L * vocab, stream);
                case TOKEN -> driver.copyToHostAsync(readBack, graph.activations() + graph.list.token(), 4, stream);
                case NOTHING -> { }
            }
            driver.synchronize(stream);
            if (result == ReadBack.LOGITS) {
                MemorySegment.copy(readBack, ValueLayout.JAVA_FLOAT, 0, logits(), 0, vocab);
            }
            last = graph;
            advance(count);
        }

        /** The StepRows of {@code count} consecutive tokens of this sequence from position {@code at}. */
        private List<CommandList.StepRow> rows(int[] tokens, int from, int count, int at) {
            return CommandList.consecutive(tokens, from, count, at, kvRow());
        }

        /**
         * Runs the first {@code dispatches} dispatches of the decode step of {@code token} at position {@code at}
         * (one already decoded with that token: its cache rows are rewritten with the same values) and
         * returns {@code count} floats of command-list buffer {@code buffer} from byte {@code offset}.
         * The position does not move. For locating where a wrong step first leaves the CPU's path.
         */
        public float[] partialStep(int tokenId, int at, int dispatches, int buffer, long offset, int count) {
            check(new int[] {tokenId}, 0, 1, at);
            device.makeCurrent();
            decode.writeSteps(rows(new int[] {tokenId}, 0, 1, at));
            for (int d = 0; d < Math.min(dispatches, decode.bindings.length); d++) {
                decode.enqueue(stream, d);
            }
            driver.synchronize(stream);
            MemorySegment out = arena.allocate(ValueLayout.JAVA_FLOAT, Math.max(1, count));
            driver.copyToHost(out, decode.buffers[buffer] + offset, 4L * count);
            return out.toArray(ValueLayout.JAVA_FLOAT);
        }

        /**
         * Runs one real decode step of {@code token} (the position advances) and profiles it: see
         * {@link dev.glimmer.engine.backend.KernelTimings}.
         */
        public Profile profileStep(int tokenId) {
            Profile p = profile(decode, rows(new int[] {tokenId}, 0, 1, position()));
            advance(1);
            return p;
        }

        /** {@link #profileStep} for a batch of prompt tokens (at most {@link Geometry#PROMPT_TOKENS}) through the prompt graph. */
        public Profile profilePrompt(int[] tokens, int from, int count) {
            if (count > prompt.list.tokens()) {
                throw new IllegalArgumentException("a prompt batch holds at most " + prompt.list.tokens() + " tokens");
            }
            check(tokens, from, count, position());
            Profile p = profileByDispatch(prompt, rows(tokens, from, count, position()));
            advance(count);
            return p;
        }

        /** {@link GpuTokenDecoder#checkRun} for {@code count} tokens at position {@code at}. */
        private void check(int[] tokens, int from, int count, int at) {
            checkOpen();
            GpuTokenDecoder.checkRun(tokens, from, count, at, contextSize, embeddingRows);
        }
    }

    /**
     * Profiles one batch decode step of {@code sequences} (each at its position, each fed {@code tokens[i]}; all
     * positions advance): see {@link dev.glimmer.engine.backend.KernelTimings}.
     */
    public Profile profileBatch(List<Sequence> sequences, int[] tokens) {
        int n = sequences.size();
        Graph graph = batches.stream().filter(g -> g.list.tokens() >= n).findFirst()
                .orElseThrow(() -> new IllegalArgumentException("no batch graph holds " + n + " rows"));
        List<CommandList.StepRow> steps = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            Sequence q = sequences.get(i);
            GpuTokenDecoder.checkRun(tokens, i, 1, q.position(), contextSize, embeddingRows);
            steps.add(q.nextRow(tokens[i]));
        }
        Profile p = profile(graph, steps);
        sequences.forEach(q -> q.advance(1));
        return p;
    }

    /** Replays of a graph per timing: enough that launch jitter averages out, few enough for a quick bench. */
    private static final int PROFILE_REPLAYS = 20;

    /**
     * Runs {@code graph} once for real, then, with the same StepArgs, times it as captured and times, per kind of
     * dispatch, a graph of the same list without that kind's dispatches: the kind's time is the difference. The
     * dispatches left out leave their outputs as the real run wrote them, so the rest does the same work.
     */
    private Profile profile(Graph graph, List<CommandList.StepRow> rows) {
        double step = runAndTime(graph, rows);
        List<KernelTime> out = new ArrayList<>();
        for (Map.Entry<String, List<Integer>> kind : byKind(graph).entrySet()) {
            boolean[] skip = new boolean[graph.list.dispatches().size()];
            kind.getValue().forEach(d -> skip[d] = true);
            MemorySegment without = graph.capture(stream, skip);
            double rest;
            try {
                rest = timeGraph(without);
            } finally {
                driver.destroyGraph(without);
            }
            // Below the timer's noise a kind can measure a hair negative; it took no measurable time.
            out.add(kernelTime(graph, kind.getKey(), kind.getValue(), rows.size(), Math.max(0, step - rest)));
        }
        return profiled(graph, step, out);
    }

    /** Runs of the list dispatch by dispatch in {@link #profileByDispatch}; each kind's time is the median. */
    private static final int PROFILE_RUNS = 3;

    /**
     * Runs {@code graph} once for real, times it as captured, then runs its list dispatch by dispatch with an
     * event after each, {@link #PROFILE_RUNS} times: a kind's time is the sum of its dispatches' (the median of
     * the runs). For a prompt batch, not {@link #profile}: how many tiles the experts' kernels run depends on how
     * the tokens are routed, and leaving a kind out changes the data they are routed on (it summed to 2.4x the
     * step); and a prompt batch's dispatches run long enough (0.1 ms on average) that an event between two of them
     * costs little.
     */
    private Profile profileByDispatch(Graph graph, List<CommandList.StepRow> rows) {
        double step = runAndTime(graph, rows);
        int n = graph.list.dispatches().size();
        double[][] millis = new double[PROFILE_RUNS][n];
        MemorySegment[] events = new MemorySegment[n + 1];
        try {
            for (int e = 0; e < events.length; e++) {
                events[e] = driver.newEvent();
            }
            for (double[] run : millis) {
                driver.record(events[0], stream);
                for (int d = 0; d < n; d++) {
                    graph.enqueue(stream, d);
                    driver.record(events[d + 1], stream);
                }
                driver.synchronize(stream);
                for (int d = 0; d < n; d++) {
                    run[d] = driver.elapsedMillis(events[d], events[d + 1]);
                }
            }
        } finally {
            for (MemorySegment e : events) {
                if (e != null) {
                    driver.destroyEvent(e);
                }
            }
        }
        List<KernelTime> out = new ArrayList<>();
        for (Map.Entry<String, List<Integer>> kind : byKind(graph).entrySet()) {
            double[] runs = new double[PROFILE_RUNS];
            for (int r = 0; r < PROFILE_RUNS; r++) {
                for (int d : kind.getValue()) {
                    runs[r] += millis[r][d];
                }
            }
            java.util.Arrays.sort(runs);
            out.add(kernelTime(graph, kind.getKey(), kind.getValue(), rows.size(), runs[PROFILE_RUNS / 2]));
        }
        return profiled(graph, step, out);
    }

    /** Runs {@code graph} once for real with the StepArgs of {@code rows}; returns its time as {@link #timeGraph}. */
    private double runAndTime(Graph graph, List<CommandList.StepRow> rows) {
        device.makeCurrent();
        graph.writeSteps(rows);
        driver.launchGraph(graph.exec, stream);
        driver.synchronize(stream);
        return timeGraph(graph.exec);
    }

    /** The indices of {@code graph}'s dispatches by {@link #kind}, in the order the kinds first come. */
    private static Map<String, List<Integer>> byKind(Graph graph) {
        Map<String, List<Integer>> byKind = new LinkedHashMap<>();
        List<Dispatch> dispatches = graph.list.dispatches();
        for (int d = 0; d < dispatches.size(); d++) {
            byKind.computeIfAbsent(kind(dispatches.get(d)), k -> new ArrayList<>()).add(d);
        }
        return byKind;
    }

    /** The time of {@code kind}'s dispatches {@code ds} in a run of {@code rows} rows of {@code graph}. */
    private static KernelTime kernelTime(Graph graph, String kind, List<Integer> ds, int rows, double millis) {
        long bytes = 0;
        long multiplyAdds = 0;
        for (int d : ds) {
            Dispatch dispatch = graph.list.dispatches().get(d);
            bytes += dispatch.weightReads().stream().mapToLong(Dispatch.WeightRead::bytes).sum();
            // a dispatch's multiply-adds are those of a full list; a run of fewer rows does its rows' share
            // (all but a prompt list's output mat-vec of the last row, which is small)
            multiplyAdds += dispatch.multiplyAdds() * rows / graph.list.tokens();
        }
        return new KernelTime(kind, ds.size(), millis, bytes, multiplyAdds);
    }

    /** The profile of a step of {@code step} ms of {@code graph} (which ran last) from its kinds' times. */
    private Profile profiled(Graph graph, double step, List<KernelTime> kinds) {
        kinds.sort((a, b) -> Double.compare(b.millis(), a.millis()));
        last = graph;
        return new Profile(step, kinds, copyBandwidth());
    }

    /** Milliseconds of one replay of {@code exec}: the median of five timings of {@link #PROFILE_REPLAYS} back-to-back replays. */
    private double timeGraph(MemorySegment exec) {
        MemorySegment start = driver.newEvent();
        MemorySegment end = driver.newEvent();
        try {
            driver.launchGraph(exec, stream);
            double[] times = new double[5];
            for (int t = 0; t < times.length; t++) {
                driver.record(start, stream);
                for (int r = 0; r < PROFILE_REPLAYS; r++) {
                    driver.launchGraph(exec, stream);
                }
                driver.record(end, stream);
                driver.synchronize(stream);
                times[t] = driver.elapsedMillis(start, end) / PROFILE_REPLAYS;
            }
            java.util.Arrays.sort(times);
            return times[times.length / 2];
        } finally {
            driver.destroyEvent(start);
            driver.destroyEvent(end);
        }
    }

    /** Bytes read and written per second by a 256 MB device-to-device copy, in GB/s (the median of five). */
    private double copyBandwidth() {
        long bytes = 256L << 20;
        long a = driver.alloc(bytes);
        long b = 0;
        MemorySegment start = driver.newEvent();
        MemorySegment end = driver.newEvent();
        try {
            b = driver.alloc(bytes);
            driver.copyDeviceAsync(b, a, bytes, stream);
            double[] rates = new double[5];
            for (int t = 0; t < rates.length; t++) {
                driver.record(start, stream);
                driver.copyDeviceAsync(b, a, bytes, stream);
                driver.record(end, stream);
                driver.synchronize(stream);
                rates[t] = 2.0 * bytes / (driver.elapsedMillis(start, end) * 1e6);
            }
            java.util.Arrays.sort(rates);
            return rates[rates.length / 2];
        } finally {
            driver.destroyEvent(start);
            driver.destroyEvent(end);
            driver.free(a);
            if (b != 0) {
                driver.free(b);
            }
        }
    }

    /** The kernel, and for mat_vec, mat_mat and mat_mat_float the weight it multiplies (the same kernel runs very different shapes). */
    private static String kind(Dispatch d) {
        if (!d.kernel().startsWith("mat_") || d.weightReads().isEmpty()) {
            return d.kernel();
        }
        return d.kernel() + " " + d.weightReads().getFirst().tensor().replaceFirst("^blk\\.\\d+\\.", "");
    }

    @Override
    public void close() {
        device.makeCurrent();
        driver.synchronize(stream);
        for (Graph g : batches) {
            g.free();
        }
        prompt.free();
        decode.free();
        driver.destroyStream(stream);
        driver.freeHost(readBack);
        arena.close();
    }
}
