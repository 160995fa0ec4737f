package dev.glimmer.engine.tensor;

import dev.glimmer.kernels.WeightFormat;

/**
 * The ggml tensor types a GGUF file can hold, with their GGUF type ids and block geometry.
 * Every type is known here so that any file can be described and its tensor sizes checked;
 * which types can also be dequantized is {@link #dequantizable()}. The numbers of the types the GPU
 * kernels read come from the kernels' {@link WeightFormat}; each format's block layout is described by
 * its class ({@link Q4_0} …), whose block sizes are these.
 */
public enum GgmlType {
    F32(WeightFormat.F32),
    F16(WeightFormat.F16),
    Q4_0(WeightFormat.Q4_0),
    Q4_1(3, 32, 20),
    Q5_0(WeightFormat.Q5_0),
    Q5_1(7, 32, 24),
    Q8_0(WeightFormat.Q8_0),
    Q8_1(9, 32, 36),
    Q2_K(10, 256, 84),
    Q3_K(11, 256, 110),
    Q4_K(WeightFormat.Q4_K),
    Q5_K(WeightFormat.Q5_K),
    Q6_K(WeightFormat.Q6_K),
    Q8_K(15, 256, 292),
    IQ2_XXS(16, 256, 66),
    IQ2_XS(17, 256, 74),
    IQ3_XXS(18, 256, 98),
    IQ1_S(19, 256, 50),
    IQ4_NL(20, 32, 18),
    IQ3_S(21, 256, 110),
    IQ2_S(22, 256, 82),
    IQ4_XS(23, 256, 136),
    I8(24, 1, 1),
    I16(25, 1, 2),
    I32(26, 1, 4),
    I64(27, 1, 8),
    F64(28, 1, 8),
    IQ1_M(29, 256, 56),
    BF16(30, 1, 2),
    TQ1_0(34, 256, 54),
    TQ2_0(35, 256, 66),
    MXFP4(39, 32, 17);

    private static final GgmlType[] BY_ID = new GgmlType[64];

    static {
        for (GgmlType t : values()) {
            BY_ID[t.id] = t;
        }
    }

    // (An enum's fields and constructor: the same form as WeightFormat's.)
    /** The type id stored in GGUF tensor infos. */
    public final int id;
    /** Elements per block. */
    public final int blockSize;
    /** Bytes per block. */
    public final int bytesPerBlock;

    GgmlType(int id, int blockSize, int bytesPerBlock) {
        this.id = id;
        this.blockSize = blockSize;
        this.bytesPerBlock = bytesPerBlock;
    }

    /** A type the GPU kernels read: its numbers are the kernels' ({@link WeightFormat}). */
    GgmlType(WeightFormat format) {
        this(format.id, format.blockValues, format.blockBytes);
    }

    /** The type with this GGUF id, or null when the id is unknown. */
    public static GgmlType byId(int id) {
        return id >= 0 && id < BY_ID.length ? BY_ID[id] : null;
    }

    /** ggml's lower-case name, e.g. {@code q4_K}, {@code f32}. */
    public String ggmlName() {
        String n = name().toLowerCase(java.util.Locale.ROOT);
        return n.endsWith("_k") ? n.substring(0, n.length() - 2) + "_K" : n;
    }

    /** Bytes of one row of {@code elements} values; the count must be a multiple of the block size. */
    public long rowBytes(long elements) {
        if (elements % blockSize != 0) {
            throw new IllegalArgumentException(this + " rows must be a multiple of " + blockSize + ", got " + elements);
        }
        return elements / blockSize * bytesPerBlock;
    }

    /** True for types Glimmer can dequantize and compute with. */
    public boolean dequantizable() {
        return switch (this) {
            case F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K -> true;
            default -> false;
        };
    }

    /** True for the block-quantized types (not plain floats or integers). */
    public boolean quantized() {
        return blockSize > 1;
    }
}
