package dev.glimmer.engine.gguf;

import dev.glimmer.engine.tensor.GgmlType;
import java.util.Arrays;

/**
 * A tensor's entry in a GGUF file.
 *
 * @param name   the tensor name, e.g. {@code blk.3.ffn_up_exps.weight}
 * @param shape  ggml dimensions, {@code ne0} (the contiguous row length) first
 * @param type   the element type
 * @param offset byte offset of the data, relative to the start of the file's data section
 * @param size   bytes of data
 */
public record TensorInfo(String name, long[] shape, GgmlType type, long offset, long size) {

    /** Dimension {@code i} ({@code ne_i}); 1 beyond the stored dimensions. */
    public long ne(int i) {
        return i < shape.length ? shape[i] : 1;
    }

    public long elements() {
        long n = 1;
        for (long d : shape) {
            n *= d;
        }
        return n;
    }

    /** Number of rows of {@code ne0} elements (all dimensions after the first multiplied). */
    public long rows() {
        long n = 1;
        for (int i = 1; i < shape.length; i++) {
            n *= shape[i];
        }
        return n;
    }

    /** Bytes of one row. */
    public long rowBytes() {
        return type.rowBytes(ne(0));
    }

    public String shapeString() {
        return Arrays.toString(shape);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof TensorInfo t
                && t.name.equals(name)
                && Arrays.equals(t.shape, shape)
                && t.type == type
                && t.offset == offset
                && t.size == size;
    }

    @Override
    public int hashCode() {
        return name.hashCode() * 31 + Arrays.hashCode(shape);
    }

    @Override
    public String toString() {
        return name + " " + type.ggmlName() + " " + shapeString();
    }
}
