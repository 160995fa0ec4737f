package dev.glimmer.engine.gguf;

import dev.glimmer.engine.InvalidInputException;

/** A GGUF file that is malformed, truncated or unsupported; the message names the file and what is wrong. */
public final class GgufFormatException extends InvalidInputException {
    public GgufFormatException(String message) {
        super(message);
    }
}
