package dev.glimmer.engine.backend.emulated;

import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.SequencePools;
import dev.glimmer.engine.backend.commandlist.CommandListPool;
import dev.glimmer.engine.backend.commandlist.ListRunner;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.kernels.decode.BufferSpec;
import dev.glimmer.kernels.decode.CommandList;
import dev.glimmer.kernels.decode.Dispatch;
import dev.glimmer.kernels.emulator.Emulator;
import dev.glimmer.kernels.emulator.FiberOrder;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The command lists replayed on the CPU kernel emulator, dispatch by dispatch, as a {@link ListRunner}: slow, but the
 * same lists and kernels as Metal and CUDA, so that the self-test and the tests of serving on a GPU-style pool run
 * where there is no GPU. Needs clang-19 to build the emulator. Weight buffers are views of the mapped model file; the
 * rest lives in native memory owned by this runner.
 */
public final class EmulatorRunner implements ListRunner {

    /**
     * Tokens of a prompt batch: fewer than a GPU's (the emulator runs every threadgroup of a batch, used or not), but
     * enough that prompts span several batches, the last one partly used.
     */
    public static final int PROMPT_TOKENS = 4;

    private final GlmModel model;
    private final Emulator emulator = Emulator.load();
    private final FiberOrder order;
    private final Arena arena = Arena.ofShared();
    /** The KV cache and greedy token buffers, shared by every list this runner binds. */
    private final Map<BufferSpec, MemorySegment> pooled = new HashMap<>();

    /** Replays {@code model}'s lists, running each threadgroup's fibers in {@code order}. */
    public EmulatorRunner(GlmModel model, FiberOrder order) {
        this.model = model;
        this.order = order;
    }

    /** A pool of {@code slots} sequences of {@code capacity} positions on the emulator, fibers in order. */
    public static CommandListPool pool(GlmModel model, int slots, int capacity) {
        return pool(model, slots, capacity, 0);
    }

    /** As {@link #pool(GlmModel, int, int)}, drafting up to {@code drafts} tokens a step (CommandListPool#drafts). */
    public static CommandListPool pool(GlmModel model, int slots, int capacity, int drafts) {
        return new CommandListPool(
                model,
                new EmulatorRunner(model, FiberOrder.inOrder()),
                slots,
                capacity,
                PROMPT_TOKENS,
                CommandListPool.drafts(model, drafts));
    }

    /** The emulator's pools of {@code model}, for a backend choice (tests, {@code --backend emulated}). */
    public static SequencePools pools(GlmModel model) {
        return pools(model, 0);
    }

    /** As {@link #pools(GlmModel)}, drafting up to {@code drafts} tokens a step where the model can. */
    public static SequencePools pools(GlmModel model, int drafts) {
        int made = CommandListPool.drafts(model, drafts);
        return new SequencePools() {
            @Override
            public SequencePool pool(int slots, int capacity) {
                return EmulatorRunner.pool(model, slots, capacity, made);
            }

            @Override
            public long bytesPerSequence(int capacity) {
                return CommandListPool.bytesPerSequence(model, capacity, made > 0);
            }
        };
    }

    @Override
    public Bound bind(CommandList list) {
        MemorySegment file = model.file().mapping();
        List<MemorySegment> buffers = new ArrayList<>();
        for (BufferSpec b : list.buffers()) {
            // the pooled kinds once for every list, as the CUDA and Metal runners keep them
            buffers.add(
                    b.kind().pooled()
                            ? pooled.computeIfAbsent(b, spec -> allocate(spec.bytes()))
                            : switch (b.kind()) {
                                case WEIGHTS -> file.asSlice(b.fileOffset(), b.bytes());
                                case ARGS -> arena.allocateFrom(ValueLayout.JAVA_BYTE, list.args());
                                default -> allocate(b.bytes());
                            });
        }
        List<List<MemorySegment>> bindings = new ArrayList<>();
        for (Dispatch d : list.dispatches()) {
            List<MemorySegment> bound = new ArrayList<>();
            for (Dispatch.Binding b : d.bindings()) {
                bound.add(buffers.get(b.buffer()).asSlice(b.offset()));
            }
            bindings.add(bound);
        }
        MemorySegment step = buffers.get(list.buffer(BufferSpec.Kind.STEP));
        return new Bound() {
            @Override
            public void writeSteps(byte[] steps) {
                MemorySegment.copy(steps, 0, step, ValueLayout.JAVA_BYTE, 0, steps.length);
            }

            @Override
            public void run(int dispatches) {
                for (int i = 0; i < dispatches; i++) {
                    Dispatch d = list.dispatches().get(i);
                    emulator.dispatch(d.kernel(), bindings.get(i), d.threadgroupMemory(), d.grid(), d.threads(), order);
                }
            }

            @Override
            public void read(int buffer, long offset, MemorySegment into) {
                MemorySegment.copy(buffers.get(buffer), offset, into, 0, into.byteSize());
            }

            @Override
            public void write(int buffer, long offset, MemorySegment from) {
                MemorySegment.copy(from, 0, buffers.get(buffer), offset, from.byteSize());
            }
        };
    }

    private MemorySegment allocate(long bytes) {
        return arena.allocate(Math.max(16, bytes), 256);
    }

    @Override
    public MemorySegment hostBuffer(long bytes) {
        return arena.allocate(bytes, 64);
    }

    /** Every run is done when it returns. */
    @Override
    public void finish() {}

    /** Every run and read is done when it returns: nothing to wait for. */
    @Override
    public Fence fence() {
        return Fence.DONE;
    }

    @Override
    public void close() {
        arena.close();
    }
}
