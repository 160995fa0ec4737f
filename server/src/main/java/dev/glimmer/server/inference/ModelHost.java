package dev.glimmer.server.inference;

/**
 * The served model's life cycle, seen by the HTTP side: loading (routes answer 503, {@code /health}
 * too), ready, or failed to load. The server starts listening before the model is loaded so that
 * {@code /health} can say it is loading.
 */
public final class ModelHost {

    /** Where loading stands. */
    public sealed interface State {
    }

    public record Loading(String progress) implements State {
    }

    public record Ready(ServedModel model) implements State {
    }

    /**
     * @param reason what went wrong, in one line for clients and the CLI
     * @param cause  the failure itself
     */
    public record Failed(String reason, Throwable cause) implements State {
    }

    private volatile State state = new Loading("starting");

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

    /**
     * The model, ready to generate.
     *
     * @throws UnavailableException while it loads, when it failed to load, or when its generation stopped
     *                              after an internal error
     */
    public ServedModel require() {
        return switch (state) {
            case Ready r -> {
                r.model().scheduler().failure().ifPresent(e -> {
                    throw new UnavailableException("generation stopped after an internal error (" + e
                            + "); the server must be restarted", 60);
                });
                yield r.model();
            }
            case Loading l -> throw new UnavailableException("the model is loading (" + l.progress() + "); try again shortly", 5);
            case Failed f -> throw new UnavailableException("the model failed to load: " + f.reason(), 60);
        };
    }
}
