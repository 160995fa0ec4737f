package dev.glimmer.server.http;

import io.helidon.http.HeaderNames;
import io.helidon.webserver.http.ServerResponse;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;

/**
 * A non-streaming JSON response whose body takes a while to compute (a generation). Helidon tells a
 * handler that its client left only when a write fails, so once the answer has taken longer than
 * {@link #PROBE_AFTER_PROPERTY} (2 s) {@link #keepAlive()} writes a space (JSON allows whitespace before a value:
 * clients parse the body as usual), at most one per {@link #PROBE_EVERY_NANOS}, and a failed write
 * throws {@link ClientGoneException}, which stops the generation. A quick answer is never probed: its
 * body starts with its JSON, and a client that leaves it is noticed at the latest when it is sent.
 * A connection that has just been closed by the peer still takes one write (the peer answers it with a
 * reset), so a gone client is noticed about two probes after it left.
 *
 * <p>Until the first space the response is untouched, so early errors keep their HTTP status. After
 * it the status is 200, and a failure is reported as an error object (in the route's {@link ErrorShape}) in the body.
 */
public final class HeldJsonResponse {
    /**
     * An answer that ends sooner goes out as plain JSON: most non-streamed answers of a small model, and every error.
     * The system property {@code glimmer.http.probe-after-ms} sets it (2,000 by default), read for each response: a
     * tiny model answers a thousand tokens within a second, so tests of a long answer probe sooner.
     */
    static final String PROBE_AFTER_PROPERTY = "glimmer.http.probe-after-ms";
    /** Between two spaces at least this: a gone client is noticed within about two of them. */
    static final long PROBE_EVERY_NANOS = 500_000_000L;

    private static final byte[] SPACE = {' '};

    private final ServerResponse res;
    private final ErrorShape errorShape;
    private final long opened = System.nanoTime();
    private final long probeAfterNanos = Long.getLong(PROBE_AFTER_PROPERTY, 2_000L) * 1_000_000L;
    /** Spaces come at most every {@link #PROBE_EVERY_NANOS}, more often only where the first comes sooner. */
    private final long probeEveryNanos = Math.min(PROBE_EVERY_NANOS, probeAfterNanos);

    private long lastProbe;
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

    /**
     * Writes one space when the answer has been computed for longer than {@link #PROBE_AFTER_PROPERTY} (2 s) and the last one
     * is {@link #PROBE_EVERY_NANOS} old; throws {@link ClientGoneException} when the client has left.
     */
    public synchronized void keepAlive() {
        long now = System.nanoTime();
        if (now - opened < probeAfterNanos || out != null && now - lastProbe < probeEveryNanos) {
            return;
        }
        if (out == null) {
            res.header(HeaderNames.CONTENT_TYPE, "application/json");
            out = res.outputStream();
        }
        lastProbe = now;
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
