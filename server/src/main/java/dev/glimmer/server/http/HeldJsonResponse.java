package dev.glimmer.server.http;

import io.helidon.http.HeaderNames;
import io.helidon.webserver.http.ServerResponse;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;

/**
 * A non-streaming JSON response whose body takes a while to compute (a generation). Helidon tells a
 * handler that its client left only when a write fails, so while the body is computed
 * {@link #keepAlive()} writes one space (JSON allows whitespace before a value: clients parse the
 * body as usual) and a failed write throws {@link ClientGoneException}, which stops the generation
 * within a token, or within a prompt chunk while the prompt is processed.
 *
 * <p>Until the first space the response is untouched, so early errors keep their HTTP status. After
 * it the status is 200, and a failure is reported as an error object (in the route's {@link ErrorShape}) in the body.
 */
public final class HeldJsonResponse {
    private static final byte[] SPACE = {' '};

    private final ServerResponse res;
    private final ErrorShape errorShape;
    private OutputStream out;
    private boolean gone;

    private HeldJsonResponse(ServerResponse res, ErrorShape errorShape) {
        this.res = res;
        this.errorShape = errorShape;
    }

    /** A response whose late failures are OpenAI error objects. */
    public static HeldJsonResponse open(ServerResponse res) {
        return open(res, ErrorShape.OPENAI);
    }

    public static HeldJsonResponse open(ServerResponse res, ErrorShape errorShape) {
        return new HeldJsonResponse(res, errorShape);
    }

    /** Writes one space; throws {@link ClientGoneException} when the client has left. */
    public synchronized void keepAlive() {
        if (out == null) {
            res.header(HeaderNames.CONTENT_TYPE, "application/json");
            out = res.outputStream();
        }
        write(SPACE);
    }

    /** Sends the body and ends the response (a client that has left gets nothing). */
    public synchronized void send(Object body) {
        byte[] json = Json.write(body).getBytes(StandardCharsets.UTF_8);
        if (out == null) {
            res.header(HeaderNames.CONTENT_TYPE, "application/json");
            res.send(json);
            return;
        }
        try {
            write(json);
        } catch (ClientGoneException gone) {
            // Nobody is listening any more.
        }
        close();
    }

    /** Reports {@code failed}: with its own status while nothing was sent (by rethrowing it), else in the body. */
    public synchronized void fail(ApiException failed) {
        if (out == null) {
            throw failed;
        }
        try {
            write(Json.write(errorShape.body(failed)).getBytes(StandardCharsets.UTF_8));
        } catch (ClientGoneException gone) {
            // Nobody is listening any more.
        }
        close();
    }

    private void write(byte[] bytes) {
        if (gone) {
            throw new ClientGoneException();
        }
        try {
            out.write(bytes);
            out.flush();
        } catch (IOException | RuntimeException e) {
            // Helidon reports a closed connection as an UncheckedIOException or its own runtime exceptions.
            gone = true;
            throw new ClientGoneException();
        }
    }

    private void close() {
        try {
            out.close();
        } catch (IOException | RuntimeException e) {
            gone = true;
        }
    }
}
