package dev.glimmer.engine.backend;

import dev.glimmer.engine.InvalidInputException;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntConsumer;

/**
 * The slots of a {@link SequencePool} and the sequences that hold them: slot i's sequence has its own KV rows
 * (a range of one KV buffer on a GPU, a cache of its own on the CPU) and its position. A sequence takes the first
 * free slot ({@link #open}) and gives it back when it closes; the pool finds its slot again from the handle
 * ({@link #own}). Its rows are simply reused: the kernels read only the rows below a sequence's KV length.
 */
public final class SequenceSlots {

    /** One open sequence: its slot and position. */
    public final class Slot implements SequencePool.Sequence {
        private final int index;
        private int position;

        private Slot(int index) {
            this.index = index;
        }

        /** The slot's index, 0 .. slots − 1. */
        public int index() {
            return index;
        }

        @Override
        public int position() {
            return position;
        }

        @Override
        public int capacity() {
            return capacity;
        }

        @Override
        public void truncate(int n) {
            if (n < 0 || n > position) {
                throw new IllegalArgumentException("cannot truncate a sequence of " + position + " positions to " + n);
            }
            position = n;
        }

        /** After a run of {@code count} tokens: they are in the cache now. */
        public void advance(int count) {
            position += count;
        }

        /** Frees the slot for another sequence; a second close does nothing. */
        @Override
        public void close() {
            if (held[index] == this) {
                held[index] = null;
                freed.accept(index);
            }
        }
    }

    private final Slot[] held;
    private final int capacity;
    private final IntConsumer freed;

    /** {@code slots} slots of {@code capacity} positions each; {@code freed} is told the index of each slot freed. */
    public SequenceSlots(int slots, int capacity, IntConsumer freed) {
        if (slots < 1) {
            throw new IllegalArgumentException("a pool holds at least one sequence, not " + slots);
        }
        if (capacity < 1) {
            throw new IllegalArgumentException("a sequence holds at least one position, not " + capacity);
        }
        this.held = new Slot[slots];
        this.capacity = capacity;
        this.freed = freed;
    }

    /** A sequence on the first free slot, at position 0. */
    public Slot open() {
        for (int i = 0; i < held.length; i++) {
            if (held[i] == null) {
                held[i] = new Slot(i);
                return held[i];
            }
        }
        throw new IllegalStateException("all " + held.length + " sequences of the pool are in use");
    }

    /** The slot of {@code sequence}, an open sequence of these slots. */
    public Slot own(SequencePool.Sequence sequence) {
        for (Slot s : held) {
            if (s == sequence) {
                return s;
            }
        }
        throw new IllegalStateException("the sequence is closed or belongs to another pool");
    }

    /** The slots of {@code sequences}, distinct open sequences of these slots. */
    public List<Slot> own(List<SequencePool.Sequence> sequences) {
        List<Slot> out = new ArrayList<>(sequences.size());
        for (int i = 0; i < sequences.size(); i++) {
            Slot s = own(sequences.get(i));
            if (out.contains(s)) {
                throw new IllegalArgumentException("sequence " + i + " appears twice in one step");
            }
            out.add(s);
        }
        return out;
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

    /**
     * Checks a run of {@code tokens[from .. from+count)} into {@code slot} before any of it is computed: at least one
     * token, every id a row of the embedding table of {@code vocabulary} rows, and room for all of them in the context.
     */
    public static void checkRun(Slot slot, int[] tokens, int from, int count, int vocabulary) {
        if (count < 1) {
            throw new IllegalArgumentException("a run needs at least one token, got " + count);
        }
        for (int i = from; i < from + count; i++) {
            if (tokens[i] < 0 || tokens[i] >= vocabulary) {
                throw new InvalidInputException(
                        "token id " + tokens[i] + " is outside the vocabulary of " + vocabulary);
            }
        }
        if (slot.position() + count > slot.capacity()) {
            throw new InvalidInputException("the context of " + slot.capacity() + " positions has room for "
                    + (slot.capacity() - slot.position()) + " more tokens, not " + count);
        }
    }
}
