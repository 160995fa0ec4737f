package dev.glimmer.engine.tensor;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Optional;

/**
 * Finds block scales that are NaN or infinite. Dequantization and dot products pass such
 * scales through exactly as ggml does (every value of the block becomes NaN or ±Inf, or NaN
 * where the quant is 0), which poisons a forward pass silently; this check names the culprit.
 */
public final class ScaleCheck {

    /** An fp16 scale field of a block: its name in ggml's struct and its byte offset in the block. */
    record ScaleField(String name, int offset) {
    }

    private ScaleCheck() {
    }

    /** The fp16 scale fields of each block of {@code type}; none for the plain float types. */
    static List<ScaleField> scaleFields(GgmlType type) {
        return switch (type) {
            case Q4_0, Q5_0, Q8_0 -> List.of(new ScaleField("d", 0));
            case Q4_1, Q5_1 -> List.of(new ScaleField("d", 0), new ScaleField("m", 2));
            case Q4_K, Q5_K -> List.of(new ScaleField("d", 0), new ScaleField("dmin", Q4_K.DMIN));
            case Q6_K -> List.of(new ScaleField("d", Q6_K.D));
            default -> List.of();
        };
    }

    /**
     * The first block of a tensor whose scale is not finite, as a one-line message such as
     * {@code tensor blk.0.ffn_up.weight block 17 has a non-finite scale d (NaN)}; empty when all
     * are finite. {@code data} holds the tensor's blocks from offset 0.
     */
    public static Optional<String> firstNonFiniteScale(String tensorName, GgmlType type, MemorySegment data) {
        List<ScaleField> fields = scaleFields(type);
        long blocks = data.byteSize() / type.bytesPerBlock;
        for (long b = 0; b < blocks; b++) {
            for (ScaleField field : fields) {
                float scale = Blocks.half(data, b * type.bytesPerBlock + field.offset());
                if (!Float.isFinite(scale)) {
                    return Optional.of("tensor " + tensorName + " block " + b + " has a non-finite scale "
                            + field.name() + " (" + describe(scale) + ")");
                }
            }
        }
        return Optional.empty();
    }

    private static String describe(float value) {
        return Float.isNaN(value) ? "NaN" : value > 0 ? "+Inf" : "-Inf";
    }
}
