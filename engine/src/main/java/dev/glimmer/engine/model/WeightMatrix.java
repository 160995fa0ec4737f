package dev.glimmer.engine.model;

import dev.glimmer.engine.tensor.GgmlType;
import java.lang.foreign.MemorySegment;

/**
 * A matrix of weights read in place from the mapped file: {@code rows} rows of {@code cols} values
 * of {@code type}, row r at byte {@code r * rowBytes()} of {@code data}. {@code W·x} means
 * {@code out[r] = Σ_c W[r][c]·x[c]} (ggml's mul_mat sums over ne0 = cols).
 *
 * @param name the tensor it comes from (with the slice, e.g. {@code blk.1.ffn_up_exps.weight[3]}), for messages
 */
public record WeightMatrix(String name, GgmlType type, MemorySegment data, int rows, int cols) {

    public long rowBytes() {
        return type.rowBytes(cols);
    }

    /** Rows {@code first .. first+count-1} as a matrix of their own (no copy). */
    public WeightMatrix rows(int first, int count) {
        return new WeightMatrix(
                name + "[rows " + first + ".." + (first + count - 1) + "]",
                type,
                data.asSlice(first * rowBytes(), count * rowBytes()),
                count,
                cols);
    }
}
