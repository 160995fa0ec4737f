package dev.glimmer.engine.generate;

/** Why a generation ended. */
public enum FinishReason {
    /** An end-of-generation token or a stop string. */
    STOP,
    /** The token limit, or the context is full. */
    LENGTH,
    /** The caller cancelled it. */
    CANCELLED;

    /** The OpenAI spelling: {@code stop}, {@code length}, {@code cancelled}. */
    public String apiName() {
        return name().toLowerCase(java.util.Locale.ROOT);
    }
}
