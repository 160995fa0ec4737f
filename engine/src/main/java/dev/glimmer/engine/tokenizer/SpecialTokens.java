package dev.glimmer.engine.tokenizer;

import java.util.Collections;
import java.util.SortedSet;
import java.util.TreeSet;

/**
 * The vocabulary's special token ids, {@link #NONE} where the model has none, and the set of ids that
 * end generation.
 *
 * @param bos             beginning of sequence ({@code tokenizer.ggml.bos_token_id})
 * @param eos             end of sequence ({@code tokenizer.ggml.eos_token_id})
 * @param eot             end of turn ({@code tokenizer.ggml.eot_token_id}, else found by its text)
 * @param eom             end of message ({@code tokenizer.ggml.eom_token_id}, else found by its text)
 * @param pad             padding ({@code tokenizer.ggml.padding_token_id})
 * @param unk             unknown ({@code tokenizer.ggml.unknown_token_id})
 * @param endOfGeneration ids that end generation, ascending
 * @param addBos          whether encoding prepends {@code bos} ({@code tokenizer.ggml.add_bos_token})
 * @param addEos          whether encoding appends {@code eos} ({@code tokenizer.ggml.add_eos_token})
 */
public record SpecialTokens(
        int bos,
        int eos,
        int eot,
        int eom,
        int pad,
        int unk,
        SortedSet<Integer> endOfGeneration,
        boolean addBos,
        boolean addEos) {

    /** The id used for "this model has no such token". */
    public static final int NONE = -1;

    public SpecialTokens {
        endOfGeneration = Collections.unmodifiableSortedSet(new TreeSet<>(endOfGeneration));
    }

    /** Whether generating this id ends the reply. */
    public boolean isEndOfGeneration(int id) {
        return endOfGeneration.contains(id);
    }
}
