package dev.glimmer.server.cli;

/** Bad command-line usage: printed as one line on stderr, exit code 2. */
public final class UsageException extends RuntimeException {
    public UsageException(String message) {
        super(message);
    }
}
