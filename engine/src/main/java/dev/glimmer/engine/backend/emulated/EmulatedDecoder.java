package dev.glimmer.engine.backend.emulated;

import dev.glimmer.engine.backend.GpuTokenDecoder;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.kernels.ArgStruct;
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
 * Runs the GPU command lists on the CPU emulator: the decode step and the prompt command list a Metal
 * indirect command buffer encodes, replayed dispatch by dispatch. Weight buffers are views of the
 * mapped model file; the two lists share the KV cache; the rest lives in native memory owned by this
 * decoder.
 */
public final class EmulatedDecoder implements AutoCloseable {

    private final GlmModel model;
    private final Replay decode;
    private final Replay prompt;
    private final Emulator emulator;
    private final FiberOrder order;
    private final Arena arena = Arena.ofShared();
    private final ArgStruct stepArgs = KernelLibrary.load().struct("StepArgs");
    private final int contextSize;
    private final int vocab;
    /** The list that ran last: its argmax holds the greedy token. */
    private Replay last;
    private int position;

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

        /** Writes the StepArgs of {@code count} tokens from position {@code at} (the rest: no token) and runs the list. */
        void run(int[] tokens, int from, int count, int at) {
            byte[] args = list.steps(stepArgs, tokens, from, count, at);
            MemorySegment.copy(args, 0, buffer(BufferSpec.Kind.STEP), ValueLayout.JAVA_BYTE, 0, args.length);
            for (int i = 0; i < list.dispatches().size(); i++) {
                Dispatch d = list.dispatches().get(i);
                emulator.dispatch(d.kernel(), bindings.get(i), d.threadgroupMemory(), d.grid(), d.threads(), order);
            }
            last = this;
        }

        float[] logits() {
            return buffer(BufferSpec.Kind.ACTIVATIONS).asSlice(list.logits(), 4L * vocab).toArray(ValueLayout.JAVA_FLOAT);
        }
    }

    /** A sequence of up to {@code contextSize} positions whose prompts run in batches of {@code promptTokens}. */
    public EmulatedDecoder(GlmModel model, int contextSize, FiberOrder order, int promptTokens) {
        this.model = model;
        this.contextSize = contextSize;
        this.order = order;
        this.emulator = Emulator.load();
        this.vocab = model.vocabSize();
        DecodeModel shape = DecodeModels.of(model.file(), model.config());
        this.decode = new Replay(DecodeCommandListBuilder.build(shape, contextSize), null);
        this.prompt = new Replay(DecodeCommandListBuilder.build(shape, contextSize, promptTokens), decode);
    }

    public CommandList commandList() {
        return decode.list;
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

    /** Native memory of this sequence's buffers: all but the weights (views of the mapped file), the KV cache counted once. */
    public long bytes() {
        long decodeBytes = decode.list.buffers().stream().filter(b -> b.kind() != BufferSpec.Kind.WEIGHTS)
                .mapToLong(BufferSpec::bytes).sum();
        long promptBytes = prompt.list.buffers().stream()
                .filter(b -> b.kind() != BufferSpec.Kind.WEIGHTS && b.kind() != BufferSpec.Kind.KV_CACHE)
                .mapToLong(BufferSpec::bytes).sum();
        return decodeBytes + promptBytes;
    }

    /** Runs one decode step for {@code token} at the next position; returns the logits (a new array). */
    public float[] step(int token) {
        check(new int[] {token}, 0, 1);
        decode.run(new int[] {token}, 0, 1, position);
        position++;
        return decode.logits();
    }

    /**
     * Runs {@code tokens[from .. from+count)} through the prompt command list, a batch at a time, and
     * returns the logits after the last of them (a new array).
     */
    public float[] prompt(int[] tokens, int from, int count) {
        check(tokens, from, count);
        for (int done = 0; done < count; ) {
            int n = Math.min(prompt.list.tokens(), count - done);
            prompt.run(tokens, from + done, n, position);
            position += n;
            done += n;
        }
        return prompt.logits();
    }

    private void check(int[] tokens, int from, int count) {
        GpuTokenDecoder.checkRun(tokens, from, count, position, contextSize, model.weights().tokenEmbedding().rows());
    }


    /** The greedy token the last run's argmax dispatch chose. */
    public int greedyToken() {
        return last.buffer(BufferSpec.Kind.ACTIVATIONS).get(ValueLayout.JAVA_INT, last.list.token());
    }

    @Override
    public void close() {
        arena.close();
    }
}
