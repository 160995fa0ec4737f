package dev.glimmer.engine.backend.emulated;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.kernels.ArgStruct;
import dev.glimmer.kernels.KernelLibrary;
import dev.glimmer.kernels.decode.BufferSpec;
import dev.glimmer.kernels.decode.CommandList;
import dev.glimmer.kernels.decode.DecodeCommandListBuilder;
import dev.glimmer.kernels.decode.Dispatch;
import dev.glimmer.kernels.emulator.Emulator;
import dev.glimmer.kernels.emulator.FiberOrder;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Runs the GPU decode step on the CPU emulator: the same {@link CommandList} a Metal indirect
 * command buffer encodes, replayed dispatch by dispatch for each token. Weight buffers are views of
 * the mapped model file; the rest lives in native memory owned by this decoder.
 */
public final class EmulatedDecoder implements AutoCloseable {

    private final GlmModel model;
    private final CommandList list;
    private final Emulator emulator;
    private final FiberOrder order;
    private final Arena arena = Arena.ofShared();
    private final List<MemorySegment> buffers = new ArrayList<>();
    private final List<List<MemorySegment>> bindings = new ArrayList<>();
    private final MemorySegment step;
    private final MemorySegment activations;
    private final ArgStruct stepArgs = KernelLibrary.load().struct("StepArgs");
    private final int contextSize;
    private final int vocab;
    private int position;

    public EmulatedDecoder(GlmModel model, int contextSize, FiberOrder order) {
        this.model = model;
        this.contextSize = contextSize;
        this.order = order;
        this.list = DecodeCommandListBuilder.build(DecodeModels.of(model.file(), model.config()), contextSize);
        this.emulator = Emulator.load();
        this.vocab = model.vocabSize();
        MemorySegment file = model.file().mapping();
        for (BufferSpec b : list.buffers()) {
            buffers.add(switch (b.kind()) {
                case WEIGHTS -> file.asSlice(b.fileOffset(), b.bytes());
                case ARGS -> arena.allocateFrom(ValueLayout.JAVA_BYTE, list.args());
                default -> arena.allocate(Math.max(16, b.bytes()), 256);
            });
        }
        this.step = buffers.get(list.buffer(BufferSpec.Kind.STEP));
        this.activations = buffers.get(list.buffer(BufferSpec.Kind.ACTIVATIONS));
        for (Dispatch d : list.dispatches()) {
            List<MemorySegment> bound = new ArrayList<>();
            for (Dispatch.Binding b : d.bindings()) {
                MemorySegment buffer = buffers.get(b.buffer());
                bound.add(buffer.asSlice(b.offset()));
            }
            bindings.add(bound);
        }
    }

    public CommandList commandList() {
        return list;
    }

    /** Positions already in the KV cache. */
    public int position() {
        return position;
    }

    /**
     * Keeps the first {@code n} positions ({@code 0 ≤ n ≤ position()}): the kernels read only the cache
     * rows below the KV length, and the next steps overwrite the rest.
     */
    public void truncate(int n) {
        if (n < 0 || n > position) {
            throw new IllegalArgumentException("cannot truncate a sequence of " + position + " positions to " + n);
        }
        position = n;
    }

    /** Native memory of this sequence's buffers: all but the weights, which are views of the mapped file. */
    public long bytes() {
        return list.buffers().stream().filter(b -> b.kind() != BufferSpec.Kind.WEIGHTS).mapToLong(BufferSpec::bytes).sum();
    }

    /** Runs one decode step for {@code token} at the next position; returns the logits (a new array). */
    public float[] step(int token) {
        if (token < 0 || token >= model.weights().tokenEmbedding().rows()) {
            throw new InvalidInputException("token id " + token + " is outside the vocabulary");
        }
        if (position >= contextSize) {
            throw new InvalidInputException("the context of " + contextSize + " positions is full");
        }
        byte[] args = stepArgs.pack(Map.of("token", token, "pos", position, "kv_len", position + 1));
        MemorySegment.copy(args, 0, step, ValueLayout.JAVA_BYTE, 0, args.length);
        for (int i = 0; i < list.dispatches().size(); i++) {
            Dispatch d = list.dispatches().get(i);
            emulator.dispatch(d.kernel(), bindings.get(i), d.threadgroupMemory(), d.grid(), d.threads(), order);
        }
        position++;
        return activations.asSlice(list.logits(), 4L * vocab).toArray(ValueLayout.JAVA_FLOAT);
    }

    /** The greedy token the last step's argmax dispatch chose. */
    public int greedyToken() {
        return activations.get(ValueLayout.JAVA_INT, list.token());
    }

    @Override
    public void close() {
        arena.close();
    }
}
