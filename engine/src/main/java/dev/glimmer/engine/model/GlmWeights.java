package dev.glimmer.engine.model;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.gguf.TensorInfo;
import dev.glimmer.engine.tensor.GgmlType;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;

/**
 * Views of every tensor the trunk's forward pass reads (docs/MODEL.md §3), checked against the
 * config: a tensor whose shape disagrees with the metadata is refused with a message naming the
 * tensor, the key and both values. Matrices stay in the mapped file; only the small norm and bias
 * vectors (a few values per layer) are copied to float arrays.
 *
 * @param tokenEmbedding {@code token_embd.weight}, one row per token
 * @param outputNorm     {@code output_norm.weight}
 * @param output         {@code output.weight}, or the token embedding when the file has none (tied embeddings)
 * @param layers         the trunk layers (an MTP/NextN block is not included)
 * @param nextn          the multi-token-prediction block after the trunk, or null when the file has none
 */
public record GlmWeights(
        WeightMatrix tokenEmbedding, float[] outputNorm, WeightMatrix output, List<Layer> layers, NextN nextn) {

    /**
     * The NextN (MTP) block (docs/MODEL.md §4b): from the trunk's hidden state at one position and the embedding of
     * the token at the next, one more transformer block predicts the token after that.
     *
     * @param ehProj         {@code nextn.eh_proj} (2E → E), applied to {@code concat(rms(embedding, enorm),
     *                       rms(hidden, hnorm))}
     * @param enorm          {@code nextn.enorm}
     * @param hnorm          {@code nextn.hnorm}
     * @param layer          the block's attention and MoE ({@code blk.<trunk layers>.*}), with its own KV rows
     * @param embedding      {@code nextn.embed_tokens}, or the trunk's token embedding when the file has none
     * @param headNorm       {@code nextn.shared_head_norm}, or the trunk's output norm
     * @param head           {@code nextn.shared_head_head}, or the trunk's output matrix
     */
    public record NextN(
            WeightMatrix ehProj,
            float[] enorm,
            float[] hnorm,
            Layer layer,
            WeightMatrix embedding,
            float[] headNorm,
            WeightMatrix head) {}

    /**
     * One transformer block.
     *
     * @param qA       {@code attn_q_a} (E → q_lora_rank); null for models without q_lora, which use {@code q} directly
     * @param qANorm   {@code attn_q_a_norm}; null without q_lora
     * @param q        {@code attn_q_b} (q_lora_rank → H·key_length_mla), or {@code attn_q} (E → H·key_length_mla)
     * @param kvA      {@code attn_kv_a_mqa} (E → kv_lora_rank + rope dims)
     * @param kB       {@code attn_k_b} per head: kv_lora_rank rows of nope values (absorbs K's up-projection into Q)
     * @param vB       {@code attn_v_b} per head: value_length_mla rows of kv_lora_rank values
     * @param dense    the dense FFN of a leading block, else null
     * @param moe      the MoE block of the other layers, else null
     */
    public record Layer(
            float[] attnNorm,
            WeightMatrix qA,
            float[] qANorm,
            WeightMatrix q,
            WeightMatrix kvA,
            float[] kvANorm,
            WeightMatrix[] kB,
            WeightMatrix[] vB,
            WeightMatrix attnOutput,
            float[] ffnNorm,
            Ffn dense,
            Moe moe) {}

    /** A SwiGLU feed-forward block: {@code down · (silu(gate·h) ⊙ (up·h))}. */
    public record Ffn(WeightMatrix gate, WeightMatrix up, WeightMatrix down) {}

    /**
     * The mixture of experts of one layer.
     *
     * @param router        {@code ffn_gate_inp}: one logit per expert
     * @param selectionBias {@code exp_probs_b.bias}, added to the probabilities only to choose experts; null when absent
     * @param experts       the routed experts (views into the stacked {@code *_exps} tensors)
     * @param shared        the shared expert, null when {@code expert_shared_count} is 0
     */
    public record Moe(WeightMatrix router, float[] selectionBias, Ffn[] experts, Ffn shared) {}

    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** Finds and checks every tensor of {@code config}'s model in {@code file}. */
    public static GlmWeights from(GgufFile file, GlmConfig c) {
        Loader l = new Loader(file);
        String P = GlmConfig.P;
        Dim e = new Dim(c.embedding(), P + "embedding_length");
        TensorInfo embd = file.tensor("token_embd.weight");
        Dim vocab = new Dim(embd.ne(1), "token_embd.weight's row count");
        WeightMatrix tokenEmbedding = l.matrix("token_embd.weight", e, vocab);
        float[] outputNorm = l.vector("output_norm.weight", e);
        WeightMatrix output =
                file.findTensor("output.weight").isPresent() ? l.matrix("output.weight", e, vocab) : tokenEmbedding;

        List<Layer> layers = new ArrayList<>();
        for (int i = 0; i < c.layers(); i++) {
            layers.add(layer(file, l, c, e, i));
        }
        NextN nextn = null;
        if (c.nextnLayers() > 0
                && file.findTensor("blk." + c.layers() + ".nextn.eh_proj.weight")
                        .isPresent()) {
            int i = c.layers();
            String b = "blk." + i + ".nextn.";
            if (c.isDense(i)) {
                throw new InvalidInputException(
                        file.path().getFileName() + ": the NextN block " + i
                                + " has a dense FFN (leading_dense_block_count covers it); only a MoE NextN block is supported");
            }
            nextn = new NextN(
                    l.matrix(b + "eh_proj.weight", new Dim(2L * c.embedding(), "2 × " + P + "embedding_length"), e),
                    l.vector(b + "enorm.weight", e),
                    l.vector(b + "hnorm.weight", e),
                    layer(file, l, c, e, i),
                    file.findTensor(b + "embed_tokens.weight").isPresent()
                            ? l.matrix(b + "embed_tokens.weight", e, vocab)
                            : tokenEmbedding,
                    file.findTensor(b + "shared_head_norm.weight").isPresent()
                            ? l.vector(b + "shared_head_norm.weight", e)
                            : outputNorm,
                    file.findTensor(b + "shared_head_head.weight").isPresent()
                            ? l.matrix(b + "shared_head_head.weight", e, vocab)
                            : output);
        }
        return new GlmWeights(tokenEmbedding, outputNorm, output, List.copyOf(layers), nextn);
    }

    /** Block {@code i}: attention, then a dense FFN or the MoE (a trunk layer, or the NextN block's). */
    private static Layer layer(GgufFile file, Loader l, GlmConfig c, Dim e, int i) {
        String P = GlmConfig.P;
        Dim x = new Dim(c.experts(), P + "expert_count");
        Dim qr = new Dim(c.qLoraRank(), P + "attention.q_lora_rank");
        Dim kvr = new Dim(c.kvLoraRank(), P + "attention.kv_lora_rank");
        Dim qAll = new Dim(
                (long) c.heads() * c.keyLengthMla(), P + "attention.head_count × " + P + "attention.key_length_mla");
        Dim kvRow = new Dim(c.kvRowWidth(), P + "attention.kv_lora_rank + " + P + "rope.dimension_count");
        Dim nope = new Dim(c.nopeDims(), P + "attention.key_length_mla - " + P + "rope.dimension_count");
        Dim heads = new Dim(c.heads(), P + "attention.head_count");
        Dim vh = new Dim(c.valueLengthMla(), P + "attention.value_length_mla");
        Dim vAll = new Dim(
                (long) c.heads() * c.valueLengthMla(),
                P + "attention.head_count × " + P + "attention.value_length_mla");
        Dim ff = new Dim(c.denseFfn(), P + "feed_forward_length");
        Dim fe = new Dim(c.expertFfn(), P + "expert_feed_forward_length");
        Dim fsh = new Dim(
                (long) c.expertFfn() * c.sharedExperts(),
                P + "expert_feed_forward_length × " + P + "expert_shared_count");
        String b = "blk." + i + ".";
        if (file.findTensor(b + "attn_kv_b.weight").isPresent()
                && file.findTensor(b + "attn_k_b.weight").isEmpty()) {
            throw new InvalidInputException(file.path().getFileName() + " stores the unsplit " + b
                    + "attn_kv_b.weight of old conversions; convert the model again with a current llama.cpp");
        }
        WeightMatrix qA = null;
        float[] qANorm = null;
        WeightMatrix q;
        if (c.qLoraRank() > 0) {
            qA = l.matrix(b + "attn_q_a.weight", e, qr);
            qANorm = l.vector(b + "attn_q_a_norm.weight", qr);
            q = l.matrix(b + "attn_q_b.weight", qr, qAll);
        } else {
            q = l.matrix(b + "attn_q.weight", e, qAll);
        }
        Ffn dense = null;
        Moe moe = null;
        if (c.isDense(i)) {
            dense = new Ffn(
                    l.matrix(b + "ffn_gate.weight", e, ff),
                    l.matrix(b + "ffn_up.weight", e, ff),
                    l.matrix(b + "ffn_down.weight", ff, e));
        } else {
            WeightMatrix[] gates;
            WeightMatrix[] ups;
            if (file.findTensor(b + "ffn_gate_up_exps.weight").isPresent()) {
                // Merged variant: each expert's matrix holds the gate rows, then the up rows.
                WeightMatrix[] merged = l.stack(
                        b + "ffn_gate_up_exps.weight",
                        e,
                        new Dim(2L * c.expertFfn(), "2 × " + P + "expert_feed_forward_length"),
                        x);
                gates = new WeightMatrix[c.experts()];
                ups = new WeightMatrix[c.experts()];
                for (int k = 0; k < c.experts(); k++) {
                    gates[k] = merged[k].rows(0, c.expertFfn());
                    ups[k] = merged[k].rows(c.expertFfn(), c.expertFfn());
                }
            } else {
                gates = l.stack(b + "ffn_gate_exps.weight", e, fe, x);
                ups = l.stack(b + "ffn_up_exps.weight", e, fe, x);
            }
            WeightMatrix[] downs = l.stack(b + "ffn_down_exps.weight", fe, e, x);
            Ffn[] experts = new Ffn[c.experts()];
            for (int k = 0; k < c.experts(); k++) {
                experts[k] = new Ffn(gates[k], ups[k], downs[k]);
            }
            Ffn shared = c.sharedExperts() == 0
                    ? null
                    : new Ffn(
                            l.matrix(b + "ffn_gate_shexp.weight", e, fsh),
                            l.matrix(b + "ffn_up_shexp.weight", e, fsh),
                            l.matrix(b + "ffn_down_shexp.weight", fsh, e));
            float[] bias =
                    file.findTensor(b + "exp_probs_b.bias").isPresent() ? l.vector(b + "exp_probs_b.bias", x) : null;
            moe = new Moe(l.matrix(b + "ffn_gate_inp.weight", e, x), bias, experts, shared);
        }
        return new Layer(
                l.vector(b + "attn_norm.weight", e),
                qA,
                qANorm,
                q,
                l.matrix(b + "attn_kv_a_mqa.weight", e, kvRow),
                l.vector(b + "attn_kv_a_norm.weight", kvr),
                l.stack(b + "attn_k_b.weight", nope, kvr, heads),
                l.stack(b + "attn_v_b.weight", kvr, vh, heads),
                l.matrix(b + "attn_output.weight", vAll, e),
                l.vector(b + "ffn_norm.weight", e),
                dense,
                moe);
    }

    /** The size a tensor dimension must have, and the metadata that says so (for the error message). */
    private record Dim(long size, String source) {}

    private record Loader(GgufFile file) {

        private TensorInfo checked(String name, Dim... dims) {
            TensorInfo t = file.tensor(name);
            for (int d = 0; d < Math.max(dims.length, t.shape().length); d++) {
                long expected = d < dims.length ? dims[d].size() : 1;
                if (t.ne(d) != expected) {
                    String why =
                            d < dims.length ? dims[d].source() + " = " + expected : "a " + dims.length + "-d tensor";
                    throw new InvalidInputException(file.path().getFileName() + ": tensor " + name + " has shape "
                            + t.shapeString() + ": dimension " + d + " is " + t.ne(d) + " but " + why);
                }
            }
            if (!t.type().dequantizable()) {
                throw new InvalidInputException(file.path().getFileName() + ": tensor " + name + " has type "
                        + t.type().ggmlName() + ", which Glimmer cannot compute with");
            }
            return t;
        }

        WeightMatrix matrix(String name, Dim cols, Dim rows) {
            TensorInfo t = checked(name, cols, rows);
            return new WeightMatrix(name, t.type(), file.data(t), (int) rows.size(), (int) cols.size());
        }

        /** A 3-d tensor as one matrix per index of its last dimension. */
        WeightMatrix[] stack(String name, Dim cols, Dim rows, Dim count) {
            TensorInfo t = checked(name, cols, rows, count);
            MemorySegment data = file.data(t);
            long bytes = t.type().rowBytes(cols.size()) * rows.size();
            WeightMatrix[] result = new WeightMatrix[(int) count.size()];
            for (int i = 0; i < result.length; i++) {
                result[i] = new WeightMatrix(
                        name + "[" + i + "]", t.type(), data.asSlice(i * bytes, bytes), (int) rows.size(), (int)
                                cols.size());
            }
            return result;
        }

        float[] vector(String name, Dim size) {
            TensorInfo t = checked(name, size);
            if (t.type() != GgmlType.F32) {
                throw new InvalidInputException(file.path().getFileName() + ": tensor " + name + " has type "
                        + t.type().ggmlName() + " (norm and bias vectors must be f32)");
            }
            return file.data(t).toArray(F32);
        }
    }
}
