package dev.glimmer.engine.synth;

import dev.glimmer.engine.InvalidInputException;
import java.util.List;

/**
 * The shape of a synthetic GLM-4.7-Flash-architecture model (llama.cpp arch {@code deepseek2}).
 * {@link #TINY} and {@link #SMALL} are the configurations of the oracle's tiny and small files,
 * {@link #FULL} the real GLM-4.7-Flash (docs/MODEL.md §2).
 *
 * @param layers          block_count (no NextN block)
 * @param denseLead       leading_dense_block_count: blocks with a dense FFN instead of experts
 * @param embd            embedding_length (E)
 * @param ff              feed_forward_length of the dense blocks
 * @param ffExpert        expert_feed_forward_length
 * @param heads           attention.head_count (H)
 * @param qLoraRank       attention.q_lora_rank
 * @param kvLoraRank      attention.kv_lora_rank
 * @param qkNope          the per-head query/key width without RoPE
 * @param qkRope          the per-head RoPE width (rope.dimension_count)
 * @param vHead           the per-head value width
 * @param experts         expert_count
 * @param expertsUsed     expert_used_count
 * @param expertsShared   expert_shared_count
 * @param contextLength   context_length
 * @param vocabSize       tokens in the vocabulary
 * @param specialBase     id of the first of the 36 GLM special tokens
 * @param merges          BPE merges; the normal tokens are the 256 byte tokens and one token per merge
 * @param randomBlocks    whether Q8_0/Q4_0 weights are drawn directly as random blocks (random scale, random
 *                        quants) instead of quantizing random floats with the reference quantizers: the full
 *                        preset does, because quantizing its 30 billion floats costs ~10-20 ns each, several
 *                        CPU-minutes on 2 cores, while drawing blocks costs almost nothing
 */
public record SynthPreset(
        String name,
        int layers,
        int denseLead,
        int embd,
        int ff,
        int ffExpert,
        int heads,
        int qLoraRank,
        int kvLoraRank,
        int qkNope,
        int qkRope,
        int vHead,
        int experts,
        int expertsUsed,
        int expertsShared,
        int contextLength,
        int vocabSize,
        int specialBase,
        int merges,
        boolean randomBlocks) {

    public static final SynthPreset TINY =
            new SynthPreset("tiny", 3, 1, 128, 320, 64, 4, 96, 64, 32, 16, 48, 8, 2, 1, 4096, 1024, 960, 704, false);
    public static final SynthPreset SMALL = new SynthPreset(
            "small", 4, 1, 256, 512, 256, 4, 256, 128, 64, 32, 64, 8, 2, 1, 4096, 2048, 1984, 1038, false);
    public static final SynthPreset FULL = new SynthPreset(
            "full",
            47,
            1,
            2048,
            10240,
            1536,
            20,
            768,
            512,
            192,
            64,
            256,
            64,
            4,
            1,
            202752,
            154880,
            154820,
            154820 - 256,
            true);

    public static final List<SynthPreset> ALL = List.of(TINY, SMALL, FULL);

    public SynthPreset {
        if (specialBase < 256 + merges || specialBase + SynthVocab.SPECIAL_TOKENS.size() > vocabSize) {
            throw new IllegalArgumentException("preset " + name + ": the special tokens do not fit the vocabulary");
        }
    }

    /** The preset called {@code name}; an InvalidInputException listing the presets otherwise. */
    public static SynthPreset byName(String name) {
        return ALL.stream()
                .filter(p -> p.name.equals(name))
                .findFirst()
                .orElseThrow(() -> new InvalidInputException("unknown preset '" + name + "' (tiny, small or full)"));
    }

    /** general.name of the files written with this preset. */
    public String modelName() {
        return "GLM-4.7-Flash " + name + " random";
    }
}
