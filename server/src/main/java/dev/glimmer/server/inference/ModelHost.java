package dev.glimmer.server.inference;

import dev.glimmer.server.http.ApiException;

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

    public record Failed(String reason) implements State {
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

    public void failed(String reason) {
        state = new Failed(reason);
    }

    /** The model, or a 503 saying why there is none. */
    public ServedModel require() {
        return switch (state) {
            case Ready r -> r.model();
            case Loading l -> throw ApiException.unavailable("the model is loading (" + l.progress() + "); try again shortly", 5);
            case Failed f -> throw ApiException.unavailable("the model failed to load: " + f.reason(), 60);
        };
    }
}
