package dev.glimmer.engine.backend.commandlist;

import dev.glimmer.engine.backend.KernelTimings;
import dev.glimmer.kernels.decode.CommandList;
import java.lang.foreign.MemorySegment;
import java.util.Optional;

/**
 * What a device supplies to run the GPU command lists for a {@link CommandListPool}: a CUDA graph per list, a Metal
 * indirect command buffer per list, or a replay on the kernel emulator. The pool owns everything else (the lists, the
 * KV slots, the step arguments, the choice of list, prompt chunking, readouts). One runner per pool; it owns what it
 * makes and frees it on {@link #close}. Not thread-safe.
 */
public interface ListRunner extends AutoCloseable {

    /**
     * Makes the buffers of {@code list} (its weights; its KV cache buffers, shared by every list this runner binds, so
     * that all of them read and write one KV pool; the rest its own, its argument buffer holding the list's args) and
     * prepares it to run (captures a graph, encodes an indirect command buffer).
     */
    Bound bind(CommandList list);

    /** Host memory of {@code bytes} that {@link Bound#read}s land in (pinned on CUDA); freed with the runner. */
    MemorySegment hostBuffer(long bytes);

    /** Waits until every run and read queued so far is done (CUDA queues them on a stream; elsewhere they are done already). */
    void finish();

    /** A new {@link Fence} (freed with the runner). */
    Fence fence();

    /**
     * A point in the queue of runs and reads that the host can wait for without waiting for what was queued after it:
     * the results of one step while the next one runs. Made once, set again and again.
     */
    interface Fence {
        /** The fence of a runner whose runs and reads are done when they return (the emulator, Metal). */
        Fence DONE = new Fence() {
            @Override
            public void set() {}

            @Override
            public void await() {}
        };

        /** Marks the end of what is queued now. */
        void set();

        /** Waits until everything queued before the last {@link #set} is done. */
        void await();
    }

    /** Times lists kernel by kernel, where the device can. */
    default Optional<Profiler> profiler() {
        return Optional.empty();
    }

    /** Frees the buffers, encodings and host memory it made; the weights where it owns them. */
    @Override
    void close();

    /** One bound command list. */
    interface Bound {
        /** Writes the step buffer: a {@code StepArgs} per row ({@link CommandList#steps}). */
        void writeSteps(byte[] steps);

        /** Runs the first {@code dispatches} dispatches of the list (all of them: the whole list as encoded). */
        void run(int dispatches);

        /** Reads {@code into.byteSize()} bytes of list buffer {@code buffer} from byte {@code offset} into {@code into}. */
        void read(int buffer, long offset, MemorySegment into);

        /**
         * Writes {@code from.byteSize()} bytes into list buffer {@code buffer} from byte {@code offset}, in order with the
         * runs and reads queued ({@code from}: {@link #hostBuffer} memory, left alone until {@link #finish}).
         */
        void write(int buffer, long offset, MemorySegment from);
    }

    /** Times a bound list's dispatches (for {@code bench}); see {@link KernelTimings}. */
    interface Profiler {
        /**
         * Runs {@code list} once for real with the steps written, then times it as one graph and, per kind of
         * dispatch, without that kind: the kind's time is the difference (a decode step).
         */
        KernelTimings.Profile byLeavingOut(Bound list, int rows);

        /** Runs {@code list} once for real, then times it dispatch by dispatch between events (a prompt batch). */
        KernelTimings.Profile byDispatch(Bound list, int rows);
    }
}
