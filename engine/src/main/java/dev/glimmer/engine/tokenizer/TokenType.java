package dev.glimmer.engine.tokenizer;

/**
 * What kind of entry a vocabulary token is, as stored in {@code tokenizer.ggml.token_type} (the ids
 * are the GGUF ones). The type decides how a token is matched in text and how it is rendered:
 * <ul>
 *   <li>{@link #CONTROL} and {@link #UNKNOWN} tokens are markup (e.g. {@code <|user|>}): recognised
 *       in text only when special-token parsing is on, hidden when decoding unless asked for;</li>
 *   <li>{@link #USER_DEFINED} tokens are always recognised in text and always rendered verbatim;</li>
 *   <li>{@link #NORMAL} tokens are byte-level BPE pieces;</li>
 *   <li>{@link #BYTE} tokens ({@code <0xAB>}) stand for one raw byte;</li>
 *   <li>{@link #UNUSED} and {@link #UNDEFINED} tokens render as nothing.</li>
 * </ul>
 */
public enum TokenType {
    UNDEFINED(0),
    NORMAL(1),
    UNKNOWN(2),
    CONTROL(3),
    USER_DEFINED(4),
    UNUSED(5),
    BYTE(6);

    private final int ggufId;

    TokenType(int ggufId) {
        this.ggufId = ggufId;
    }

    /** The value used in {@code tokenizer.ggml.token_type}. */
    public int ggufId() {
        return ggufId;
    }

    /** The type for a GGUF id; ids outside the known range are {@link #UNDEFINED}, as llama.cpp treats them. */
    public static TokenType fromGgufId(long id) {
        for (TokenType t : values()) {
            if (t.ggufId == id) {
                return t;
            }
        }
        return UNDEFINED;
    }

    /** Markup that is only matched in text when special-token parsing is on, and hidden by default on output. */
    public boolean isControlLike() {
        return this == CONTROL || this == UNKNOWN;
    }
}
