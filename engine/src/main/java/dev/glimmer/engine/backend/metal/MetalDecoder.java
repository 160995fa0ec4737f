package dev.glimmer.engine.backend.metal;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.backend.GpuTokenDecoder;
import dev.glimmer.engine.backend.PartialSteps;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.SequenceSlots;
import dev.glimmer.engine.backend.TokenDecoder;
import dev.glimmer.engine.backend.emulated.DecodeModels;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.kernels.ArgStruct;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.KernelLibrary;
import dev.glimmer.kernels.decode.BufferSpec;
import dev.glimmer.kernels.decode.CommandList;
import dev.glimmer.kernels.decode.DecodeCommandListBuilder;
import dev.glimmer.kernels.decode.DecodeModel;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

/**
 * Sequences of one model on the GPU sharing a KV pool, as a {@link SequencePool}: every layer's KV buffer holds
 * {@code slots} ranges of {@code capacity} rows, one per open {@link Sequence} ({@link SequenceSlots}). The decode
 * command list, the prompt command list and the batch decode lists ({@link Geometry#batchSizes}) are each encoded
 * once ({@link StepEncoder}: an indirect command buffer per list, as CUDA captures a graph per list) over the same
 * buffers: the weights as no-copy views of the mapped file (kept resident with a residency set where macOS has
 * them) and the KV pool; each list's activations, arguments and step buffer in shared storage, owned by the pool,
 * not by a conversation. A run writes the list's step buffer (a {@code StepArgs} per row: token, position, KV
 * length, the sequence's first KV row), executes the list in one command buffer, waits, and reads the logits or
 * the argmax's tokens from shared memory. One sequence steps through the decode list, a prompt through the prompt
 * list ({@link Geometry#PROMPT_TOKENS} tokens at a time), and several sequences at once ({@link #step}) through
 * the smallest batch list that holds them: one pass over the weights for all of them.
 *
 * <p>Not thread-safe: one caller at a time.
 */
public final class MetalDecoder implements SequencePool {

    private final MetalDevice device;
    private final ObjcRuntime rt;
    private final ArgStruct stepArgs = KernelLibrary.load().struct("StepArgs");
    /** Every buffer this pool made (the lists share the weights and the KV pool). */
    private final List<MemorySegment> owned = new ArrayList<>();
    private final Encoded decode;
    private final Encoded prompt;
    /** Batch decode lists of 2, 4, 8, ... rows, up to the slots (none for a pool of one). */
    private final List<Encoded> batches;
    private final MemorySegment residency;
    private final SequenceSlots<Sequence> slots;
    private final int vocab;
    /** Rows of the token embedding table: the token ids a run may hold. */
    private final int embeddingRows;
    /** The list that ran last: its argmax holds the greedy tokens. */
    private Encoded last;
    private boolean closed;

    /** A command list, its Metal buffers (same order as its BufferSpecs) and its encoding. */
    private record Encoded(CommandList list, List<MemorySegment> buffers, StepEncoder encoder, MemorySegment step,
                           MemorySegment activations) {

        /** Output row {@code row}'s logits (a new array). */
        float[] logits(int row, int vocab) {
            return activations.asSlice(list.logits() + 4L * vocab * row, 4L * vocab).toArray(ValueLayout.JAVA_FLOAT);
        }

        /** Output row {@code row}'s greedy token. */
        int token(int row) {
            return activations.get(ValueLayout.JAVA_INT, list.token() + 4L * row);
        }
    }

    /**
     * A pool of {@code slots} sequences of up to {@code capacity} positions.
     *
     * @throws InvalidInputException when the model's shape is one the GPU decode step does not handle
     * @throws MetalException        when Metal refuses a buffer or an encoding
     */
    public MetalDecoder(MetalDevice device, GlmModel model, int capacity, int slots) {
        this.device = device;
        this.rt = device.runtime();
        this.vocab = model.vocabSize();
        this.embeddingRows = model.weights().tokenEmbedding().rows();
        this.slots = new SequenceSlots<>(slots, capacity);
        long kvRows = (long) slots * capacity;
        List<CommandList> lists = new ArrayList<>();
        try {
            DecodeModel shape = DecodeModels.of(model.file(), model.config());
            lists.add(DecodeCommandListBuilder.build(shape, kvRows));
            lists.add(DecodeCommandListBuilder.build(shape, kvRows, Geometry.PROMPT_TOKENS));
            for (int rows : Geometry.batchSizes(slots)) {
                lists.add(DecodeCommandListBuilder.batch(shape, kvRows, rows));
            }
        } catch (IllegalArgumentException e) {
            throw new InvalidInputException(model.file().path().getFileName() + ": " + e.getMessage());
        }
        List<Encoded> made = new ArrayList<>();
        MemorySegment resident = MemorySegment.NULL;
        try (ObjcRuntime.AutoreleasePool pool = rt.autoreleasePool()) {
            long base = model.file().mapping().address();
            for (CommandList list : lists) {
                made.add(encode(list, base, made.isEmpty() ? null : made.getFirst()));
            }
            Encoded first = made.getFirst();
            List<MemorySegment> weights = new ArrayList<>();
            for (int i = 0; i < first.list().buffers().size(); i++) {
                if (first.list().buffers().get(i).kind() == BufferSpec.Kind.WEIGHTS) {
                    weights.add(first.buffers().get(i));
                }
            }
            resident = MetalException.during(MetalException.Step.BUFFERS, () -> device.keepResident(weights));
        } catch (RuntimeException e) {
            made.forEach(built -> built.encoder().close());
            releaseBuffers();
            throw e;
        }
        this.decode = made.get(0);
        this.prompt = made.get(1);
        this.batches = List.copyOf(made.subList(2, made.size()));
        this.last = decode;
        this.residency = resident;
    }

    /** A sequence with a pool of one slot of its own, freed when it closes (the self-test, a lone decoder). */
    public static Sequence single(MetalDevice device, GlmModel model, int capacity) {
        MetalDecoder pool = new MetalDecoder(device, model, capacity, 1);
        return pool.slots.open(slot -> pool.new Sequence(slot, true));
    }

    /**
     * Memory one slot of a pool of sequences of {@code capacity} positions takes, without making one: its KV rows
     * of every layer.
     */
    public static long bytesPerSequence(GlmModel model, int capacity) {
        return kvBytes(DecodeCommandListBuilder.build(DecodeModels.of(model.file(), model.config()), capacity));
    }

    private static long kvBytes(CommandList list) {
        return list.buffers().stream().filter(b -> b.kind() == BufferSpec.Kind.KV_CACHE).mapToLong(BufferSpec::bytes).sum();
    }

    /**
     * Makes the buffers of {@code list} (the weights as views of the file mapped at {@code base}; the weights and
     * the KV pool as {@code shared}'s, where given) and encodes it.
     */
    private Encoded encode(CommandList list, long base, Encoded shared) {
        List<MemorySegment> buffers = new ArrayList<>();
        for (BufferSpec b : list.buffers()) {
            boolean sharedKind = b.kind() == BufferSpec.Kind.WEIGHTS || b.kind() == BufferSpec.Kind.KV_CACHE;
            if (shared != null && sharedKind) {
                buffers.add(shared.buffers().get(shared.list().buffers().indexOf(b)));
                continue;
            }
            MemorySegment buffer = MetalException.during(MetalException.Step.BUFFERS, () -> b.kind() == BufferSpec.Kind.WEIGHTS
                    ? device.wrap(base + b.fileOffset(), b.bytes()) : device.newSharedBuffer(b.bytes()));
            owned.add(buffer);
            buffers.add(buffer);
        }
        MemorySegment args = buffers.get(list.buffer(BufferSpec.Kind.ARGS));
        MemorySegment.copy(list.args(), 0, device.contents(args, list.args().length), ValueLayout.JAVA_BYTE, 0,
                list.args().length);
        MemorySegment step = device.contents(buffers.get(list.buffer(BufferSpec.Kind.STEP)),
                (long) list.tokens() * stepArgs.size());
        BufferSpec act = list.buffers().get(list.buffer(BufferSpec.Kind.ACTIVATIONS));
        MemorySegment activations = device.contents(buffers.get(list.buffer(BufferSpec.Kind.ACTIVATIONS)), act.bytes());
        StepEncoder encoder = MetalException.during(MetalException.Step.ENCODING, () -> new StepEncoder(device.calls(), list,
                buffers, device.pipelines(), device.maxThreadgroupMemory(), device.mode()));
        return new Encoded(list, buffers, encoder, step, activations);
    }

    /** A sequence on a free slot, at position 0; closing it frees the slot. */
    @Override
    public Sequence open() {
        return slots.open(slot -> new Sequence(slot, false));
    }

    @Override
    public int slots() {
        return slots.size();
    }

    /** One slot's KV rows of every layer: what one more cached conversation costs. */
    @Override
    public long bytesPerSequence() {
        return kvBytes(decode.list()) / slots.size();
    }

    @Override
    public int inUse() {
        return slots.inUse();
    }

    /** The shared-storage buffers of the pool, the KV pool counted once (the weights are views of the mapped file). */
    @Override
    public long bytes() {
        long total = kvBytes(decode.list());
        for (Encoded e : lists()) {
            total += e.list().buffers().stream()
                    .filter(b -> b.kind() != BufferSpec.Kind.WEIGHTS && b.kind() != BufferSpec.Kind.KV_CACHE)
                    .mapToLong(BufferSpec::bytes).sum();
        }
        return total;
    }

    private List<Encoded> lists() {
        List<Encoded> all = new ArrayList<>(List.of(decode, prompt));
        all.addAll(batches);
        return all;
    }

    /** The decode step's command list. */
    public CommandList commandList() {
        return decode.list();
    }

    /**
     * One decode step of several open sequences of this pool: one runs the decode list, more the smallest batch list
     * that holds them (more than the largest: in turns of it). Each row's logits are read only where its readout
     * does not take its greedy token (both lie in shared memory).
     */
    @Override
    public Next[] step(List<TokenDecoder> sequences, int[] tokens, Readout[] readouts) {
        int n = sequences.size();
        List<Sequence> own = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            if (!(sequences.get(i) instanceof Sequence q) || q.pool() != this) {
                throw new IllegalArgumentException("a sequence of another pool in a Metal step");
            }
            if (own.contains(q)) {
                throw new IllegalArgumentException("sequence " + i + " appears twice in one step");
            }
            q.check(tokens, i, 1);
            own.add(q);
        }
        Next[] next = new Next[n];
        int max = batches.isEmpty() ? 1 : batches.getLast().list().tokens();
        for (int first = 0; first < n; first += max) {
            int rows = Math.min(max, n - first);
            Encoded list = rows == 1 ? decode
                    : batches.stream().filter(b -> b.list().tokens() >= rows).findFirst().orElseThrow();
            List<CommandList.StepRow> steps = new ArrayList<>(rows);
            for (int i = first; i < first + rows; i++) {
                steps.add(own.get(i).nextRow(tokens[i]));
            }
            run(list, steps, list.list().dispatches().size());
            for (int i = first; i < first + rows; i++) {
                int row = i - first;
                int greedy = list.token(row);
                next[i] = readouts[i].takes(greedy) ? Next.greedy(greedy) : Next.of(list.logits(row, vocab));
                own.get(i).advance(1);
            }
        }
        return next;
    }

    /** Writes the StepArgs of {@code rows} (the rest of the list's rows: none) and runs its first {@code dispatches}. */
    private void run(Encoded list, List<CommandList.StepRow> rows, int dispatches) {
        byte[] args = list.list().steps(stepArgs, rows);
        MemorySegment.copy(args, 0, list.step(), ValueLayout.JAVA_BYTE, 0, args.length);
        try (ObjcRuntime.AutoreleasePool pool = rt.autoreleasePool()) {
            MetalException.during(MetalException.Step.RUNNING, () -> {
                list.encoder().run(device.queue(), dispatches);
                return null;
            });
        }
        last = list;
    }

    private void releaseBuffers() {
        for (MemorySegment b : owned) {
            rt.release(b);
        }
        owned.clear();
    }

    /** Frees the pool's indirect command buffers and buffers (its sequences must be closed first); once. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        device.endResidency(residency);
        for (Encoded e : lists()) {
            e.encoder().close();
        }
        releaseBuffers();
    }

    /**
     * One sequence of the pool as a {@link GpuTokenDecoder}: its slot's rows of the KV pool and its position (see
     * {@link SequenceSlots}). A single token runs the decode list, more the prompt list in batches.
     */
    public final class Sequence extends SequenceSlots.Slot implements GpuTokenDecoder, PartialSteps {
        /** Whether closing this sequence closes its pool too ({@link #single}). */
        private final boolean ownsPool;

        private Sequence(int slot, boolean ownsPool) {
            super(slots, slot);
            this.ownsPool = ownsPool;
        }

        private MetalDecoder pool() {
            return MetalDecoder.this;
        }

        /** One token runs the decode step, more the prompt command list in batches; returns the last token's logits. */
        @Override
        public float[] forward(int[] tokens, int from, int count) {
            check(tokens, from, count);
            Encoded list = count == 1 ? decode : prompt;
            for (int done = 0; done < count; ) {
                int n = Math.min(list.list().tokens(), count - done);
                run(list, nextRows(tokens, from + done, n), list.list().dispatches().size());
                advance(n);
                done += n;
            }
            return list.logits(0, vocab);
        }

        /** The greedy token of this sequence's last run (the pool's last run). */
        @Override
        public int greedyToken() {
            return last.token(0);
        }

        @Override
        public CommandList commandList() {
            return decode.list();
        }

        @Override
        public float[] partialStep(int token, int at, int dispatches, int buffer, long offset, int count) {
            checkOpen();
            if (at >= position()) {
                throw new IllegalArgumentException("position " + at + " has not been decoded yet");
            }
            run(decode, List.of(new CommandList.StepRow(token, at, kvRow())), dispatches);
            return device.contents(decode.buffers().get(buffer), offset + 4L * count).asSlice(offset)
                    .toArray(ValueLayout.JAVA_FLOAT);
        }

        /** The whole pool's shared-storage memory when it is this sequence's own, else its slot's KV rows. */
        @Override
        public long bytes() {
            return ownsPool ? MetalDecoder.this.bytes() : bytesPerSequence();
        }

        private void check(int[] tokens, int from, int count) {
            checkOpen();
            GpuTokenDecoder.checkRun(tokens, from, count, position(), capacity(), embeddingRows);
        }

        @Override
        public void close() {
            super.close();
            if (ownsPool) {
                MetalDecoder.this.close();
            }
        }
    }
}
