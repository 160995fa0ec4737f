package dev.glimmer.engine.synth;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.tensor.GgmlType;
import java.util.Arrays;
import java.util.Locale;
import java.util.stream.Collectors;

/**
 * The type of a synthetic model's weight matrices (1-D tensors, norms, the router and the expert
 * bias stay F32, as llama-quantize keeps them), with the {@code general.file_type} (llama_ftype)
 * that llama.cpp writes for it. {@link #Q4_K_M} is a mix, as llama-quantize makes it (see
 * {@link #matrixType}); the others give every matrix one type.
 */
public enum SynthWeightType {
    F32(GgmlType.F32, 0),
    F16(GgmlType.F16, 1),
    Q8_0(GgmlType.Q8_0, 7),
    Q4_0(GgmlType.Q4_0, 2),
    Q4_K_M(GgmlType.Q4_K, 15);

    /** The type of the matrices (of most of them, for a mix). */
    public final GgmlType ggmlType;

    public final int fileType;

    SynthWeightType(GgmlType ggmlType, int fileType) {
        this.ggmlType = ggmlType;
        this.fileType = fileType;
    }

    /**
     * The type of weight matrix {@code name} with rows of {@code rowLength} values, in a model of
     * {@code layers} layers and {@code experts} experts. For Q4_K_M, llama-quantize's rules for this
     * architecture's tensors (llama.cpp's {@code llama_tensor_get_type}): Q4_K, except
     * <ul>
     *   <li>{@code output.weight}: Q6_K (Q8_0 when its rows are not whole 256-value blocks);</li>
     *   <li>{@code ffn_down*} (dense, experts' and shared) of the first and last eighth of the layers and
     *       of every third layer between ({@link #moreBits}): Q6_K;</li>
     *   <li>{@code attn_output.weight} in a model of 8 experts: Q5_K;</li>
     * </ul>
     * and where a row is not whole 256-value blocks the 32-value type llama-quantize falls back to:
     * Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0 (the absorbed key heads, 192 values a row, are Q5_0).
     */
    public GgmlType matrixType(String name, long rowLength, int layers, int experts) {
        if (this != Q4_K_M) {
            return ggmlType;
        }
        GgmlType type = GgmlType.Q4_K;
        if (name.equals("output.weight")) {
            return rowLength % GgmlType.Q4_K.blockSize == 0 ? GgmlType.Q6_K : GgmlType.Q8_0;
        } else if (name.contains("ffn_down") && moreBits(layer(name), layers)) {
            type = GgmlType.Q6_K;
        } else if (name.contains("attn_output.weight") && experts == 8) {
            type = GgmlType.Q5_K;
        }
        if (rowLength % type.blockSize != 0) {
            type = switch (type) {
                case Q4_K -> GgmlType.Q5_0;
                case Q5_K -> GgmlType.Q5_1;
                default -> GgmlType.Q8_0;
            };
        }
        return type;
    }

    /** llama-quantize's {@code use_more_bits}: the first and last eighth of the layers, and every third between. */
    static boolean moreBits(int layer, int layers) {
        return layer < layers / 8 || layer >= 7 * layers / 8 || (layer - layers / 8) % 3 == 2;
    }

    /** The layer of a {@code blk.N.} tensor. */
    private static int layer(String name) {
        return Integer.parseInt(name.substring("blk.".length(), name.indexOf('.', "blk.".length())));
    }

    /** The weight type called {@code name} (f32, f16, q8_0, q4_0, q4_k_m); an InvalidInputException otherwise. */
    public static SynthWeightType byName(String name) {
        for (SynthWeightType t : values()) {
            if (t.name().equalsIgnoreCase(name)) {
                return t;
            }
        }
        throw new InvalidInputException("unknown weight type '" + name + "' ("
                + Arrays.stream(values())
                        .map(t -> t.name().toLowerCase(Locale.ROOT))
                        .collect(Collectors.joining(", "))
                + ")");
    }
}
