package dev.glimmer.engine.tokenizer;

import java.util.Arrays;

/** A growable list of ints without boxing, for encoding output. */
final class IntList {
    private int[] values;
    private int size;

    IntList(int capacity) {
        values = new int[Math.max(1, capacity)];
    }

    void add(int v) {
        if (size == values.length) {
            values = Arrays.copyOf(values, size * 2);
        }
        values[size++] = v;
    }

    void addAll(int[] vs) {
        if (size + vs.length > values.length) {
            values = Arrays.copyOf(values, Math.max(size * 2, size + vs.length));
        }
        System.arraycopy(vs, 0, values, size, vs.length);
        size += vs.length;
    }

    void clear() {
        size = 0;
    }

    int[] toArray() {
        return Arrays.copyOf(values, size);
    }
}
