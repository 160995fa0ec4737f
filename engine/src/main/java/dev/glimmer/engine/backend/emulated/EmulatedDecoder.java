package dev.glimmer.engine.backend.emulated;

import dev.glimmer.engine.backend.GpuTokenDecoder;
import dev.glimmer.engine.backend.SequenceSlots;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.kernels.ArgStruct;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.KernelLibrary;
import dev.glimmer.kernels.decode.BufferSpec;
import dev.glimmer.kernels.decode.CommandList;
import dev.glimmer.kernels.decode.DecodeCommandListBuilder;
import dev.glimmer.kernels.decode.DecodeModel;
import dev.glimmer.kernels.decode.Dispatch;
import dev.glimmer.kernels.emulator.Emulator;
import dev.glimmer.kernels.emulator.FiberOrder;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

/**
 * Runs the GPU command lists on the CPU emulator: the decode step, the prompt command list and the batch decode
 * lists a Metal indirect command buffer encodes, replayed dispatch by dispatch. Like {@code CudaDecoder} it is a
 * pool of sequences ({@link #open}) sharing one KV buffer per layer, a range of rows each; several sequences
 * step together through the batch list ({@link #step(List, int[])}). Weight buffers are views of the mapped
 * model file; the rest lives in native memory owned by this decoder.
 */
public final class EmulatedDecoder implements AutoCloseable {

    private final GlmModel model;
    private final Replay decode;
    private final Replay prompt;
    /** Batch decode lists of 2, 4, ... rows (Geometry.batchSizes). */
    private final List<Replay> batches = new ArrayList<>();
    private final Emulator emulator;
    private final FiberOrder order;
    private final Arena arena = Arena.ofShared();
    private final ArgStruct stepArgs = KernelLibrary.load().struct("StepArgs");
    private final int contextSize;
    private final int vocab;
    private final SequenceSlots<Sequence> open;
    /** The list that ran last: its argmax holds the greedy token. */
    private Replay last;

    /** One command list's buffers and per-dispatch bindings. */
    private final class Replay {
        final CommandList list;
        final List<MemorySegment> buffers = new ArrayList<>();
        final List<List<MemorySegment>> bindings = new ArrayList<>();

        /** Buffers of {@code list}; the KV cache buffers are {@code shared}'s where given. */
        Replay(CommandList list, Replay shared) {
            this.list = list;
            MemorySegment file = model.file().mapping();
            for (int i = 0; i < list.buffers().size(); i++) {
                BufferSpec b = list.buffers().get(i);
                buffers.add(switch (b.kind()) {
                    case WEIGHTS -> file.asSlice(b.fileOffset(), b.bytes());
                    case ARGS -> arena.allocateFrom(ValueLayout.JAVA_BYTE, list.args());
                    case KV_CACHE -> shared != null ? shared.buffer(b) : arena.allocate(Math.max(16, b.bytes()), 256);
                    default -> arena.allocate(Math.max(16, b.bytes()), 256);
                });
            }
            for (Dispatch d : list.dispatches()) {
                List<MemorySegment> bound = new ArrayList<>();
                for (Dispatch.Binding b : d.bindings()) {
                    bound.add(buffers.get(b.buffer()).asSlice(b.offset()));
                }
                bindings.add(bound);
            }
        }

        MemorySegment buffer(BufferSpec spec) {
            return buffers.get(list.buffers().indexOf(spec));
        }

        MemorySegment buffer(BufferSpec.Kind kind) {
            return buffers.get(list.buffer(kind));
        }

        /** Writes the StepArgs of {@code rows} (the rest: no token) and runs the list. */
        void run(List<CommandList.StepRow> rows) {
            byte[] args = list.steps(stepArgs, rows);
            MemorySegment.copy(args, 0, buffer(BufferSpec.Kind.STEP), ValueLayout.JAVA_BYTE, 0, args.length);
            for (int i = 0; i < list.dispatches().size(); i++) {
                Dispatch d = list.dispatches().get(i);
                emulator.dispatch(d.kernel(), bindings.get(i), d.threadgroupMemory(), d.grid(), d.threads(), order);
            }
            last = this;
        }

        /** Output row {@code row}'s logits (a new array). */
        float[] logits(int row) {
            return buffer(BufferSpec.Kind.ACTIVATIONS).asSlice(list.logits() + 4L * vocab * row, 4L * vocab)
                    .toArray(ValueLayout.JAVA_FLOAT);
        }

        int token(int row) {
            return buffer(BufferSpec.Kind.ACTIVATIONS).get(ValueLayout.JAVA_INT, list.token() + 4L * row);
        }
    }

    /** A pool of one sequence of up to {@code contextSize} positions whose prompts run in batches of {@code promptTokens}. */
    public EmulatedDecoder(GlmModel model, int contextSize, FiberOrder order, int promptTokens) {
        this(model, contextSize, 1, order, promptTokens);
    }

    /** A pool of {@code slots} sequences of up to {@code contextSize} positions; prompts run in batches of {@code promptTokens}. */
    public EmulatedDecoder(GlmModel model, int contextSize, int slots, FiberOrder order, int promptTokens) {
        this.model = model;
        this.contextSize = contextSize;
        this.order = order;
        this.emulator = Emulator.load();
        this.vocab = model.vocabSize();
        this.open = new SequenceSlots<>(slots, contextSize);
        DecodeModel shape = DecodeModels.of(model.file(), model.config());
        long kvRows = (long) slots * contextSize;
        this.decode = new Replay(DecodeCommandListBuilder.build(shape, kvRows), null);
        this.prompt = new Replay(DecodeCommandListBuilder.build(shape, kvRows, promptTokens), decode);
        for (int rows : Geometry.batchSizes(slots)) {
            batches.add(new Replay(DecodeCommandListBuilder.batch(shape, kvRows, rows), decode));
        }
    }

    public CommandList commandList() {
        return decode.list;
    }

    /** A sequence on a free slot, at position 0; closing it frees the slot. */
    public Sequence open() {
        return open.open(Sequence::new);
    }

    public int slots() {
        return open.size();
    }

    /** Sequences open now. */
    public int inUse() {
        return open.inUse();
    }

    /** Positions each sequence holds at most. */
    public int contextSize() {
        return contextSize;
    }

    /** Native memory of one slot's KV rows. */
    public long kvBytesPerSequence() {
        return decode.list.buffers().stream().filter(b -> b.kind() == BufferSpec.Kind.KV_CACHE)
                .mapToLong(BufferSpec::bytes).sum() / open.size();
    }

    /** Native memory of the pool's buffers: all but the weights (views of the mapped file), the KV buffers counted once. */
    public long bytes() {
        long total = 0;
        for (Replay r : replays()) {
            total += r.list.buffers().stream()
                    .filter(b -> b.kind() != BufferSpec.Kind.WEIGHTS && (r == decode || b.kind() != BufferSpec.Kind.KV_CACHE))
                    .mapToLong(BufferSpec::bytes).sum();
        }
        return total;
    }

    private List<Replay> replays() {
        List<Replay> all = new ArrayList<>(List.of(decode, prompt));
        all.addAll(batches);
        return all;
    }

    /**
     * One decode step of several open sequences of this pool, {@code tokens[i]} into {@code sequences.get(i)}: one
     * sequence runs the decode list, more the smallest batch list that holds them (in turns of the largest).
     * Returns each row's logits (new arrays); {@link #greedyTokens} then holds each row's greedy token.
     */
    public float[][] step(List<Sequence> sequences, int[] tokens) {
        int n = sequences.size();
        float[][] out = new float[n][];
        lastGreedy = new int[n];
        for (int i = 0; i < n; i++) {
            sequences.get(i).check(tokens, i, 1);
        }
        if (n == 1) {
            out[0] = sequences.getFirst().step(tokens[0]);
            lastGreedy[0] = greedyToken();
            return out;
        }
        int max = batches.getLast().list.tokens();
        for (int first = 0; first < n; first += max) {
            int rows = Math.min(max, n - first);
            Replay replay = batches.stream().filter(r -> r.list.tokens() >= rows).findFirst().orElseThrow();
            List<CommandList.StepRow> steps = new ArrayList<>();
            for (int i = first; i < first + rows; i++) {
                Sequence q = sequences.get(i);
                steps.add(q.nextRow(tokens[i]));
            }
            replay.run(steps);
            for (int i = first; i < first + rows; i++) {
                out[i] = replay.logits(i - first);
                lastGreedy[i] = replay.token(i - first);
                sequences.get(i).advance(1);
            }
        }
        return out;
    }

    private int[] lastGreedy = new int[0];

    /** The greedy token of each row of the last {@link #step(List, int[])}. */
    public int[] greedyTokens() {
        return lastGreedy.clone();
    }

    /** The greedy token the last run's argmax dispatch chose (the first row's, after a batch). */
    public int greedyToken() {
        return last.token(0);
    }

    /** One sequence of the pool: its slot's rows of the KV buffers and its position (see {@link SequenceSlots}). */
    public final class Sequence extends SequenceSlots.Slot {
        private Sequence(int slot) {
            super(open, slot);
        }

        /** Runs one decode step for {@code token} at the next position; returns the logits (a new array). */
        public float[] step(int token) {
            check(new int[] {token}, 0, 1);
            decode.run(List.of(nextRow(token)));
            advance(1);
            return decode.logits(0);
        }

        /**
         * Runs {@code tokens[from .. from+count)} through the prompt command list, a batch at a time, and
         * returns the logits after the last of them (a new array).
         */
        public float[] prompt(int[] tokens, int from, int count) {
            check(tokens, from, count);
            for (int done = 0; done < count; ) {
                int n = Math.min(prompt.list.tokens(), count - done);
                prompt.run(nextRows(tokens, from + done, n));
                advance(n);
                done += n;
            }
            return prompt.logits(0);
        }

        private void check(int[] tokens, int from, int count) {
            checkOpen();
            GpuTokenDecoder.checkRun(tokens, from, count, position(), contextSize, model.weights().tokenEmbedding().rows());
        }
    }

    @Override
    public void close() {
        arena.close();
    }
}
