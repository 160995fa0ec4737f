package dev.glimmer.server.inference;

/**
 * The served model's life cycle, seen by the HTTP side: loading (routes answer 503, {@code /health}
 * too), ready, or failed to load; and, once told to drain (SIGTERM), no longer taking requests while
 * the ones it has finish. The server starts listening before the model is loaded so that
 * {@code /health} can say it is loading.
 */
public final class ModelHost {

    /** Where loading stands. */
    public sealed interface State {}

    public record Loading(String progress) implements State {}

    public record Ready(ServedModel model) implements State {}

    /**
     * @param reason what went wrong, in one line for clients and the CLI
     * @param cause  the failure itself
     */
    public record Failed(String reason, Throwable cause) implements State {}

    /** Seconds a client refused while draining is told to wait: another replica takes it meanwhile. */
    static final int DRAINING_RETRY_AFTER_SECONDS = 1;

    private volatile State state = new Loading("starting");
    private volatile boolean draining;

    public State state() {
        return state;
    }

    public void progress(String what) {
        if (state instanceof Loading) {
            state = new Loading(what);
        }
    }

    public void ready(ServedModel model) {
        state = new Ready(model);
    }

    public void failed(Throwable cause) {
        state = new Failed(cause.getMessage() != null ? cause.getMessage() : cause.toString(), cause);
    }

    /** From now on new requests are refused with 503 ({@link #require}); running ones go on. */
    public void drain() {
        draining = true;
    }

    public boolean draining() {
        return draining;
    }

    /**
     * The model, ready to take a request.
     *
     * @throws UnavailableException while it loads, when it failed to load, when its generation stopped
     *                              after an internal error, or while the server drains
     */
    public ServedModel require() {
        if (draining) {
            throw new UnavailableException(
                    "the server is shutting down: it finishes the requests it has and takes no"
                            + " new ones; send this one to another replica",
                    DRAINING_RETRY_AFTER_SECONDS);
        }
        return alive();
    }

    /**
     * The model, loaded and able to generate, draining or not: what a liveness probe asks.
     *
     * @throws UnavailableException while it loads, when it failed to load, or when its generation stopped
     *                              after an internal error
     */
    public ServedModel alive() {
        return switch (state) {
            case Ready r -> {
                r.model().scheduler().failure().ifPresent(e -> {
                    throw new UnavailableException(
                            "generation stopped after an internal error (" + e + "); the server must be restarted", 60);
                });
                yield r.model();
            }
            case Loading l ->
                throw new UnavailableException("the model is loading (" + l.progress() + "); try again shortly", 5);
            case Failed f -> throw new UnavailableException("the model failed to load: " + f.reason(), 60);
        };
    }
}
