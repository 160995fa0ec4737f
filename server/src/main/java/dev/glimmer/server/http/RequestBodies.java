package dev.glimmer.server.http;

import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import io.helidon.webserver.http.ServerRequest;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.SocketTimeoutException;
import java.util.regex.Pattern;

/** Reads a request body as a JSON object within the size limit. */
public final class RequestBodies {

    /**
     * @throws ApiException 413 when the body exceeds {@code limit} bytes (checked from Content-Length when
     *                      given, else while reading), 400 when it is not a JSON object
     */
    public static JsonNode jsonObject(ServerRequest req, long limit) {
        byte[] bytes = read(req, limit);
        JsonNode node;
        try (JsonParser parser = Json.MAPPER.createParser(bytes)) {
            try {
                node = Json.MAPPER.readTree(parser);
            } catch (JsonProcessingException e) {
                // A refused limit (nesting depth, number length) has no location of its own: the parser's is where it
                // stopped.
                throw ApiException.badRequest(
                        notValidJson(e, e.getLocation() != null ? e.getLocation() : parser.currentLocation()), null);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        if (node == null || node.isMissingNode()) {
            throw ApiException.badRequest("the body is empty; expected a JSON object", null);
        }
        if (!node.isObject()) {
            throw ApiException.badRequest(
                    "the body must be a JSON object, got "
                            + node.getNodeType().name().toLowerCase(java.util.Locale.ROOT),
                    null);
        }
        return node;
    }

    /** Jackson's note of a place inside its messages: {@code [Source: REDACTED (`StreamReadFeature...` disabled); line: 1, column: 14]}. */
    private static final Pattern PARSER_LOCATION = Pattern.compile("\\[Source: [^\\]]*?line: (\\d+), column: (\\d+)]");
    /** Jackson's note of the setting behind a limit: {@code , from `StreamReadConstraints.getMaxNestingDepth()`}. */
    private static final Pattern LIMIT_SETTING = Pattern.compile(",? from `[^`]*`");

    /**
     * What is wrong with a body that does not parse, in the client's terms: where ({@code at}, line and column)
     * and why, on one line, without the parser's own words for its source and settings.
     */
    static String notValidJson(JsonProcessingException e, JsonLocation at) {
        String why = PARSER_LOCATION.matcher(e.getOriginalMessage()).replaceAll("line $1, column $2");
        why = LIMIT_SETTING.matcher(why).replaceAll("").replaceAll("\\s+", " ").strip();
        String where =
                at == null || at.getLineNr() < 1 ? "" : " at line " + at.getLineNr() + ", column " + at.getColumnNr();
        return "the body is not valid JSON" + where + ": " + why;
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
            throw ApiException.badRequest(
                    "the request body could not be read: "
                            + (e.getMessage() == null ? "it ended before its declared length" : e.getMessage()),
                    null);
        }
        if (total > limit) {
            throw ApiException.payloadTooLarge(limit);
        }
        return out.toByteArray();
    }

    private RequestBodies() {}
}
