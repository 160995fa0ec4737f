package dev.glimmer.engine.model;

import dev.glimmer.engine.gguf.GgufValue;
import dev.glimmer.engine.gguf.GgufWriter.TensorSpec;
import dev.glimmer.engine.synth.ModelSynthesizer;
import dev.glimmer.engine.synth.SynthModel;
import dev.glimmer.engine.synth.SynthPreset;
import dev.glimmer.engine.synth.SynthWeightType;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

/**
 * Variants of the architecture for the tests of the forward pass ({@code ArchitectureVariantsTest}) and of
 * the emulated GPU step ({@code EmulatedVariantsTest}): a small preset unlike the GLM-4.7-Flash shapes, edited
 * in its metadata and tensors, written with F32 weights.
 */
public final class VariantModels {
    /** Hidden 64, 4 layers of which 2 dense, 2 heads, 6 experts with 3 used and 2 shared. */
    public static final SynthPreset OTHER =
            new SynthPreset("other", 4, 2, 64, 96, 32, 2, 48, 32, 16, 8, 24, 6, 3, 2, 512, 512, 400, 100, false);
    /** Tokens of the vocabulary of {@link #OTHER}, specials among them. */
    public static final int[] TOKENS = {402, 404, 407, 5, 77, 300, 123, 45, 256, 399, 408, 1, 90, 91};
    /** The prefix of the architecture's metadata keys. */
    public static final String P = "deepseek2.";

    private VariantModels() {}

    /** {@link #OTHER} (seed 7) with its metadata and tensor list edited, written to {@code dir/name.gguf} and opened. */
    public static GlmModel write(
            Path dir, String name, Consumer<Map<String, GgufValue>> metadata, Consumer<List<TensorSpec>> tensors)
            throws Exception {
        SynthModel base = SynthModel.of(OTHER, SynthWeightType.F32, 7);
        Map<String, GgufValue> m = new LinkedHashMap<>(base.metadata());
        metadata.accept(m);
        List<TensorSpec> t = new ArrayList<>(base.tensors());
        tensors.accept(t);
        Path file = dir.resolve(name + ".gguf");
        ModelSynthesizer.write(
                new SynthModel(OTHER, SynthWeightType.F32, 7, false, m, t), file, (written, total) -> {});
        return GlmModel.open(file);
    }
}
