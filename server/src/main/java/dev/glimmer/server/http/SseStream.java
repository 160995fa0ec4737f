package dev.glimmer.server.http;

import io.helidon.http.HeaderNames;
import io.helidon.webserver.http.ServerResponse;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;

/**
 * Server-sent events written by hand, as OpenAI clients expect them: {@code data: <json>\n\n} with a
 * space after the colon, {@code : ping\n\n} comments while the prompt is processed (so that a client
 * that left is noticed), {@code data: [DONE]\n\n} at the end. Every frame is flushed at once.
 * Helidon's SSE sink is not used: it writes {@code data:x} without the space and cannot send
 * comment-only events.
 *
 * <p>A write that fails means the client went away: it throws {@link ClientGoneException} and every
 * later call does too, so the generator can be stopped.
 */
public final class SseStream implements AutoCloseable {
    private static final byte[] PING = ": ping\n\n".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] DONE = "data: [DONE]\n\n".getBytes(StandardCharsets.US_ASCII);

    private final OutputStream out;
    private boolean gone;

    private SseStream(OutputStream out) {
        this.out = out;
    }

    /** Starts a 200 event stream on {@code res}; headers are sent with the first frame. */
    public static SseStream open(ServerResponse res) {
        res.header(HeaderNames.CONTENT_TYPE, "text/event-stream");
        res.header(HeaderNames.CACHE_CONTROL, "no-cache");
        res.header("X-Accel-Buffering", "no");
        return new SseStream(res.outputStream());
    }

    /** Writes {@code data: <json>\n\n}. */
    public synchronized void data(String json) {
        write(("data: " + json + "\n\n").getBytes(StandardCharsets.UTF_8));
    }

    /**
     * Writes {@code event: <name>\ndata: <json>\n\n}: the Responses and Anthropic Messages streams
     * name every event, and the Anthropic SDKs dispatch on that name.
     */
    public synchronized void event(String name, String json) {
        write(("event: " + name + "\ndata: " + json + "\n\n").getBytes(StandardCharsets.UTF_8));
    }

    public synchronized void ping() {
        write(PING);
    }

    public synchronized void done() {
        write(DONE);
    }

    private void write(byte[] frame) {
        if (gone) {
            throw new ClientGoneException();
        }
        try {
            out.write(frame);
            out.flush();
        } catch (IOException | RuntimeException e) {
            // Helidon reports a closed connection as an UncheckedIOException or its own runtime exceptions.
            gone = true;
            throw new ClientGoneException();
        }
    }

    @Override
    public synchronized void close() {
        try {
            out.close();
        } catch (IOException | RuntimeException e) {
            gone = true;
        }
    }
}
