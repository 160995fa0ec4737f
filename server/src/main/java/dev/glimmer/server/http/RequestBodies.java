package dev.glimmer.server.http;

import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import io.helidon.webserver.http.ServerRequest;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.SocketTimeoutException;

/** Reads a request body as a JSON object within the size limit. */
public final class RequestBodies {

    /**
     * @throws ApiException 413 when the body exceeds {@code limit} bytes (checked from Content-Length when
     *                      given, else while reading), 400 when it is not a JSON object
     */
    public static JsonNode jsonObject(ServerRequest req, long limit) {
        byte[] bytes = read(req, limit);
        JsonNode node;
        try {
            node = Json.MAPPER.readTree(bytes);
        } catch (JsonProcessingException e) {
            // A refused limit (nesting depth, number length) has no location.
            JsonLocation at = e.getLocation();
            throw ApiException.badRequest("the body is not valid JSON: " + e.getOriginalMessage()
                    + (at == null ? "" : " (line " + at.getLineNr() + ", column " + at.getColumnNr() + ")"), null);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        if (node == null || node.isMissingNode()) {
            throw ApiException.badRequest("the body is empty; expected a JSON object", null);
        }
        if (!node.isObject()) {
            throw ApiException.badRequest("the body must be a JSON object, got " + node.getNodeType().name().toLowerCase(
                    java.util.Locale.ROOT), null);
        }
        return node;
    }

    /** Bodies over the limit are still read (and dropped) up to this size, so the client sees the 413. */
    private static final long DRAIN_LIMIT = 64L << 20;

    static byte[] read(ServerRequest req, long limit) {
        long declared = req.headers().contentLength().orElse(0);
        if (declared < 0) {
            throw ApiException.badRequest("Content-Length must not be negative, got " + declared, null);
        }
        if (declared > DRAIN_LIMIT) {
            throw ApiException.payloadTooLarge(limit);
        }
        if (!req.content().hasEntity()) {
            return new byte[0];
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        long total = 0;
        try (InputStream in = req.content().inputStream()) {
            byte[] buffer = new byte[8192];
            int n;
            while ((n = in.read(buffer)) > 0) {
                total += n;
                if (total <= limit) {
                    out.write(buffer, 0, n);
                } else if (total > DRAIN_LIMIT) {
                    break;
                }
            }
        } catch (IOException | RuntimeException e) {
            // The body ended before its length, its chunks were malformed, or it stopped arriving.
            if (e instanceof SocketTimeoutException || e.getCause() instanceof SocketTimeoutException) {
                throw ApiException.requestTimeout("the request body stopped arriving: nothing came for a while");
            }
            throw ApiException.badRequest("the request body could not be read: " + (e.getMessage() == null
                    ? "it ended before its declared length" : e.getMessage()), null);
        }
        if (total > limit) {
            throw ApiException.payloadTooLarge(limit);
        }
        return out.toByteArray();
    }

    private RequestBodies() {
    }
}
