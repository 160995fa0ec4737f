package dev.glimmer.kernels;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;

/**
 * The weight formats the kernels read in place, with the numbers that identify and size them: the
 * ggml type id a GGUF tensor info carries, the values of one block and its bytes. This is the one
 * home of these numbers: {@link KernelLibrary} hands them to the kernels as {@code GLIMMER_TYPE_*} and
 * {@code GLIMMER_*_BLOCK_*} macros, and the engine's {@code GgmlType} and its tensor classes take them
 * from here. The layout inside a block is described once, by the engine's class of the format
 * ({@code dev.glimmer.engine.tensor.Q4_0} …; docs/MODEL.md §5).
 */
public enum WeightFormat {
    F32(0, 1, 4),
    F16(1, 1, 2),
    Q4_0(2, 32, 18),
    Q5_0(6, 32, 22),
    Q8_0(8, 32, 34),
    Q4_K(12, 256, 144),
    Q5_K(13, 256, 176),
    Q6_K(14, 256, 210);

    // (An enum's fields and constructor: the same form as GgmlType's.)
    /** The ggml type id. */
    public final int id;
    /** Values per block. */
    public final int blockValues;
    /** Bytes per block. */
    public final int blockBytes;

    WeightFormat(int id, int blockValues, int blockBytes) {
        this.id = id;
        this.blockValues = blockValues;
        this.blockBytes = blockBytes;
    }

    /** The format of a ggml type id, or empty when the kernels cannot read that type. */
    public static Optional<WeightFormat> byId(int id) {
        for (WeightFormat f : values()) {
            if (f.id == id) {
                return Optional.of(f);
            }
        }
        return Optional.empty();
    }

    /** The macros the kernels see, e.g. {@code GLIMMER_TYPE_Q4_0 2}, {@code GLIMMER_Q4_0_BLOCK_BYTES 18}. */
    static Map<String, Integer> defines() {
        Map<String, Integer> d = new LinkedHashMap<>();
        for (WeightFormat f : values()) {
            d.put("GLIMMER_TYPE_" + f.name(), f.id);
            d.put("GLIMMER_" + f.name() + "_BLOCK_VALUES", f.blockValues);
            d.put("GLIMMER_" + f.name() + "_BLOCK_BYTES", f.blockBytes);
        }
        return d;
    }
}
