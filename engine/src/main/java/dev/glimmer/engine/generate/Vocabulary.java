package dev.glimmer.engine.generate;

/** What the generator needs to know about the tokens: where generation ends and how tokens read as text. */
public interface Vocabulary {

    /** True for the end-of-generation tokens (for GLM-4.7: {@code <|endoftext|>}, {@code <|user|>}, {@code <|observation|>}). */
    boolean isEndOfGeneration(int token);

    /** A fresh decoder for one generated sequence. */
    TextDecoder newDecoder();
}
