package dev.glimmer.server.inference;

/**
 * The model cannot take a request now: it is loading, failed to load, every slot and queue place is
 * taken, the server is shutting down, or generation stopped after an internal error. The message says
 * which, for the client; {@link #retryAfterSeconds} is how long a client should wait before trying
 * again. The HTTP layer answers it with 503 and {@code Retry-After}.
 */
public final class UnavailableException extends RuntimeException {
    private final int retryAfterSeconds;

    public UnavailableException(String message, int retryAfterSeconds) {
        super(message);
        this.retryAfterSeconds = retryAfterSeconds;
    }

    public int retryAfterSeconds() {
        return retryAfterSeconds;
    }
}
