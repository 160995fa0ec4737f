package dev.glimmer.server.inference;

import dev.glimmer.engine.generate.TextDecoder;
import dev.glimmer.engine.generate.Vocabulary;
import dev.glimmer.engine.tokenizer.StreamingDetokenizer;
import dev.glimmer.engine.tokenizer.Tokenizer;

/**
 * The tokenizer as the decode loop sees it. Control tokens are rendered as their text
 * ({@code </think>}, {@code <tool_call>}) because the chat layer's output parser reads them.
 */
final class TokenizerVocabulary implements Vocabulary {
    private final Tokenizer tokenizer;

    TokenizerVocabulary(Tokenizer tokenizer) {
        this.tokenizer = tokenizer;
    }

    @Override
    public boolean isEndOfGeneration(int token) {
        return tokenizer.isEndOfGeneration(token);
    }

    @Override
    public TextDecoder newDecoder() {
        StreamingDetokenizer detokenizer = tokenizer.streamingDetokenizer(true);
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
}
