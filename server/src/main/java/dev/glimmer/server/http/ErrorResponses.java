package dev.glimmer.server.http;

import io.helidon.http.HeaderNames;
import io.helidon.webserver.http.ServerRequest;
import io.helidon.webserver.http.ServerResponse;
import java.nio.charset.StandardCharsets;

/** Writes error objects in the shape the route's clients expect ({@link ErrorShape}). */
public final class ErrorResponses {

    /** The OpenAI error object of {@code e} as JSON text. */
    public static String body(ApiException e) {
        return Json.write(ErrorShape.OPENAI.body(e));
    }

    /** Sends {@code e} in the shape of {@code req}'s route unless the response has already been started. */
    public static void send(ServerRequest req, ServerResponse res, ApiException e) {
        send(res, e, ErrorShape.of(req.path().path()));
    }

    /** Sends {@code e} as an OpenAI error object unless the response has already been started. */
    public static void send(ServerResponse res, ApiException e) {
        send(res, e, ErrorShape.OPENAI);
    }

    /** Sends {@code e} unless the response has already been started (then nothing more can be said). */
    public static void send(ServerResponse res, ApiException e, ErrorShape shape) {
        if (res.isSent()) {
            return;
        }
        res.status(e.status());
        res.header(HeaderNames.CONTENT_TYPE, "application/json");
        e.retryAfterSeconds().ifPresent(s -> res.header(HeaderNames.RETRY_AFTER, Integer.toString(s)));
        res.send(Json.write(shape.body(e)).getBytes(StandardCharsets.UTF_8));
    }

    private ErrorResponses() {}
}
