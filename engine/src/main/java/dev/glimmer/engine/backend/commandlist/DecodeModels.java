package dev.glimmer.engine.backend.commandlist;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.gguf.TensorInfo;
import dev.glimmer.engine.model.GlmConfig;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.decode.DecodeModel;
import dev.glimmer.kernels.decode.ModelShape;
import dev.glimmer.kernels.decode.WeightTensor;
import java.util.LinkedHashMap;
import java.util.Map;

/** The GPU decode step's view of a model file: its validated config as a {@link ModelShape} and the trunk's tensors with their file offsets. */
public final class DecodeModels {

    private DecodeModels() {}

    /**
     * @throws InvalidInputException for model variants the GPU decode step does not run (no q_lora,
     *                               merged gate/up experts, more heads or wider cache rows than the attention kernel holds)
     */
    public static DecodeModel of(GgufFile file, GlmConfig c) {
        return of(file, c, false);
    }

    /**
     * As {@link #of(GgufFile, GlmConfig)}, with the NextN block's tensors ({@code blk.<layers>.*}) when {@code nextn}
     * and the file has the block: the lists of a drafting pool read them.
     */
    public static DecodeModel of(GgufFile file, GlmConfig c, boolean nextn) {
        String name = String.valueOf(file.path().getFileName());
        if (file.findTensor("blk." + c.leadingDenseBlocks() + ".ffn_gate_up_exps.weight")
                .isPresent()) {
            throw new InvalidInputException(
                    name + " stores merged ffn_gate_up_exps tensors, which the GPU decode step does not read yet");
        }
        if (c.qLoraRank() == 0) {
            throw new InvalidInputException(
                    name + " has no q_lora_rank (a \"lite\" model): the GPU decode step needs attn_q_a/attn_q_b");
        }
        if (c.heads() > Geometry.ATTENTION_MAX_HEADS || c.kvRowWidth() > Geometry.ATTENTION_MAX_ROW) {
            throw new InvalidInputException(name + " has " + c.heads() + " heads and cache rows of " + c.kvRowWidth()
                    + " values; the GPU attention kernel holds at most " + Geometry.ATTENTION_MAX_HEADS + " and "
                    + Geometry.ATTENTION_MAX_ROW);
        }
        int[] rowLengths = {
            c.embedding(),
            c.qLoraRank(),
            c.nopeDims(),
            c.kvLoraRank(),
            c.denseFfn(),
            c.expertFfn(),
            c.heads() * c.valueLengthMla()
        };
        for (int n : rowLengths) {
            if (n % Geometry.CHUNK != 0) {
                throw new InvalidInputException(name + " has weight rows of " + n
                        + " values; the GPU kernels read rows in chunks of " + Geometry.CHUNK);
            }
        }
        TensorInfo embd = file.tensor("token_embd.weight");
        int vocab = (int) file.findTensor("output.weight").orElse(embd).ne(1);
        int gating = switch (c.gating()) {
            case SOFTMAX -> 1;
            case SIGMOID -> 2;
        };
        ModelShape shape = new ModelShape(
                c.layers(),
                c.leadingDenseBlocks(),
                c.embedding(),
                c.heads(),
                c.qLoraRank(),
                c.kvLoraRank(),
                c.nopeDims(),
                c.ropeDims(),
                c.valueLengthMla(),
                c.denseFfn(),
                c.expertFfn(),
                c.experts(),
                c.expertsUsed(),
                c.expertFfn() * c.sharedExperts(),
                vocab,
                c.rmsEps(),
                c.ropeBase(),
                c.kqScale(),
                gating,
                c.expertWeightsScale(),
                c.expertWeightsNorm());
        Map<String, WeightTensor> tensors = new LinkedHashMap<>();
        for (TensorInfo t : file.tensors()) {
            if (isTrunk(t.name(), c.layers()) || nextn && isNextn(t.name(), c)) {
                tensors.put(t.name(), new WeightTensor(t.name(), t.type().id, file.fileOffset(t), t.size()));
            }
        }
        return new DecodeModel(shape, tensors);
    }

    /** A tensor of the NextN block a file with {@code nextn_predict_layers} carries after the trunk. */
    private static boolean isNextn(String name, GlmConfig c) {
        return c.nextnLayers() > 0 && name.startsWith("blk." + c.layers() + ".");
    }

    /** The tensors one trunk step reads: not those of an MTP (NextN) block. */
    private static boolean isTrunk(String name, int layers) {
        if (!name.startsWith("blk.")) {
            return true;
        }
        int layer = Integer.parseInt(name.substring(4, name.indexOf('.', 4)));
        return layer < layers && !name.contains(".nextn.");
    }
}
