package dev.glimmer.engine.synth;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.tensor.GgmlType;

import java.util.Arrays;
import java.util.Locale;
import java.util.stream.Collectors;

/**
 * The type of a synthetic model's weight matrices (1-D tensors, norms, the router and the expert
 * bias stay F32, as llama-quantize keeps them), with the {@code general.file_type} (llama_ftype)
 * that llama.cpp writes for it.
 */
public enum SynthWeightType {
    F32(GgmlType.F32, 0),
    F16(GgmlType.F16, 1),
    Q8_0(GgmlType.Q8_0, 7),
    Q4_0(GgmlType.Q4_0, 2);

    public final GgmlType ggmlType;
    public final int fileType;

    SynthWeightType(GgmlType ggmlType, int fileType) {
        this.ggmlType = ggmlType;
        this.fileType = fileType;
    }

    /** The weight type called {@code name} (f32, f16, q8_0, q4_0); an InvalidInputException otherwise. */
    public static SynthWeightType byName(String name) {
        for (SynthWeightType t : values()) {
            if (t.name().equalsIgnoreCase(name)) {
                return t;
            }
        }
        throw new InvalidInputException("unknown weight type '" + name + "' ("
                + Arrays.stream(values()).map(t -> t.name().toLowerCase(Locale.ROOT)).collect(Collectors.joining(", "))
                + ")");
    }
}
