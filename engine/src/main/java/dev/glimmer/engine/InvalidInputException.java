package dev.glimmer.engine;

/**
 * The input given to the engine is wrong: a malformed or unsupported file, a value out of range,
 * text that cannot be processed. The message is meant for the user, on one line, and says what was
 * wrong and where. Front ends report it as a client error (CLI exit code 2, HTTP 400), never as a
 * crash.
 */
public class InvalidInputException extends RuntimeException {
    public InvalidInputException(String message) {
        super(message);
    }

    public InvalidInputException(String message, Throwable cause) {
        super(message, cause);
    }
}
