package dev.glimmer.server.http;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.helidon.http.HeaderNames;
import io.helidon.webserver.http.ServerResponse;

import java.nio.charset.StandardCharsets;

/** Writes OpenAI error objects. */
public final class ErrorResponses {

    public static String body(ApiException e) {
        ObjectNode root = Json.object();
        ObjectNode error = root.putObject("error");
        error.put("message", e.getMessage());
        error.put("type", e.type());
        error.put("param", e.param());
        error.put("code", e.code());
        return Json.write(root);
    }

    /** Sends {@code e} unless the response has already been started (then nothing more can be said). */
    public static void send(ServerResponse res, ApiException e) {
        if (res.isSent()) {
            return;
        }
        res.status(e.status());
        res.header(HeaderNames.CONTENT_TYPE, "application/json");
        e.retryAfterSeconds().ifPresent(s -> res.header(HeaderNames.RETRY_AFTER, Integer.toString(s)));
        res.send(body(e).getBytes(StandardCharsets.UTF_8));
    }

    private ErrorResponses() {
    }
}
