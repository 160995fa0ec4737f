package dev.glimmer.engine.grammar;

import java.util.Objects;
import java.util.Set;

/**
 * What a reply must look like: the grammar of its text and how it begins.
 *
 * @param grammar       the text the grammar allows (after the thinking, when there is some)
 * @param thinkingFirst true when the reply starts inside GLM's reasoning (the prompt ended with
 *                      {@code <think>}): the grammar applies after {@code </think>}
 * @param controlTokens the texts of control tokens that the grammar may produce as one token (e.g.
 *                      {@code <tool_call>}); other control tokens are never chosen while it applies
 */
public record OutputGrammar(Expr grammar, boolean thinkingFirst, Set<String> controlTokens) {
    public OutputGrammar {
        Objects.requireNonNull(grammar);
        controlTokens = Set.copyOf(controlTokens);
    }
}
