package dev.glimmer.engine.generate;

import dev.glimmer.engine.tokenizer.StreamingDetokenizer;
import dev.glimmer.engine.tokenizer.Tokenizer;

/** What the generator needs to know about the tokens: where generation ends and how tokens read as text. */
public interface Vocabulary {

    /** True for the end-of-generation tokens (for GLM-4.7: {@code <|endoftext|>}, {@code <|user|>}, {@code <|observation|>}). */
    boolean isEndOfGeneration(int token);

    /** A fresh decoder for one generated sequence. */
    TextDecoder newDecoder();

    /**
     * The model's own vocabulary: its EOG set and its streaming detokenizer.
     *
     * @param renderControl whether control tokens such as {@code </think>} appear in the text
     */
    static Vocabulary of(Tokenizer tokenizer, boolean renderControl) {
        return new Vocabulary() {
            @Override
            public boolean isEndOfGeneration(int token) {
                return tokenizer.isEndOfGeneration(token);
            }

            @Override
            public TextDecoder newDecoder() {
                StreamingDetokenizer detokenizer = tokenizer.streamingDetokenizer(renderControl);
                return new TextDecoder() {
                    @Override
                    public String next(int id) {
                        return detokenizer.next(id);
                    }

                    @Override
                    public String finish() {
                        return detokenizer.finish();
                    }
                };
            }
        };
    }
}
