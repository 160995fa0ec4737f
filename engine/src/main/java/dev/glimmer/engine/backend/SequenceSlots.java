package dev.glimmer.engine.backend;

import dev.glimmer.kernels.decode.CommandList;

import java.util.List;
import java.util.function.IntFunction;

/**
 * The slots of a KV pool and the sequences that hold them, for the GPU decoders that keep every layer's KV cache
 * of all their sequences in one buffer (CUDA, the kernel emulator): slot i owns rows i * capacity .. (i + 1) *
 * capacity of each layer's buffer. A sequence takes a free slot ({@link #open}) and gives it back when it closes;
 * its rows are simply reused, since the kernels read only rows below a sequence's KV length.
 */
public final class SequenceSlots<S extends SequenceSlots.Slot> {

    /** One sequence's slot: its rows of the KV buffers and its position. */
    public abstract static class Slot implements AutoCloseable {
        private final SequenceSlots<?> owner;
        private final int index;
        private int position;

        protected Slot(SequenceSlots<?> owner, int index) {
            this.owner = owner;
            this.index = index;
        }

        /** Positions already in the KV cache. */
        public int position() {
            return position;
        }

        /** Positions the slot holds at most. */
        public int capacity() {
            return owner.capacity;
        }

        /** The KV buffer row of this sequence's position 0. */
        public int kvRow() {
            return index * owner.capacity;
        }

        /**
         * Keeps the first {@code n} positions ({@code 0 ≤ n ≤ position()}) and forgets the rest: the kernels read
         * only the rows below the KV length, and the next runs overwrite the others.
         */
        public void truncate(int n) {
            if (n < 0 || n > position) {
                throw new IllegalArgumentException("cannot truncate a sequence of " + position + " positions to " + n);
            }
            position = n;
        }

        /** The row of {@code token} fed at this sequence's next position. */
        public CommandList.StepRow nextRow(int token) {
            return new CommandList.StepRow(token, position, kvRow());
        }

        /** The rows of {@code tokens[from .. from+count)} fed from this sequence's next position. */
        public List<CommandList.StepRow> nextRows(int[] tokens, int from, int count) {
            return CommandList.consecutive(tokens, from, count, position, kvRow());
        }

        /** After a run of {@code count} tokens: they are in the cache now. */
        public void advance(int count) {
            position += count;
        }

        /** Throws unless this sequence still holds its slot. */
        public void checkOpen() {
            if (owner.held[index] != this) {
                throw new IllegalStateException("the sequence is closed");
            }
        }

        /** Frees the slot for another sequence. */
        @Override
        public void close() {
            if (owner.held[index] == this) {
                owner.held[index] = null;
            }
        }
    }

    private final Slot[] held;
    private final int capacity;

    /** {@code slots} slots of {@code capacity} positions each. */
    public SequenceSlots(int slots, int capacity) {
        if (slots < 1) {
            throw new IllegalArgumentException("a pool holds at least one sequence, not " + slots);
        }
        this.held = new Slot[slots];
        this.capacity = capacity;
    }

    /** A sequence made by {@code make} on the first free slot (its index given), at position 0. */
    public S open(IntFunction<S> make) {
        for (int i = 0; i < held.length; i++) {
            if (held[i] == null) {
                S s = make.apply(i);
                held[i] = s;
                return s;
            }
        }
        throw new IllegalStateException("all " + held.length + " sequences of the KV pool are in use");
    }

    /** Slots in all. */
    public int size() {
        return held.length;
    }

    /** Slots an open sequence holds. */
    public int inUse() {
        int n = 0;
        for (Slot s : held) {
            if (s != null) {
                n++;
            }
        }
        return n;
    }

    /** Positions per slot. */
    public int capacity() {
        return capacity;
    }
}
