package dev.glimmer.server.http;

import java.util.Optional;

/**
 * A request that cannot be served, answered with an OpenAI error object
 * {@code {"error":{"message","type","param","code"}}} and the given HTTP status. Handlers throw it;
 * the routing's error handler writes it ({@link ErrorResponses}). Which status for which mistake:
 * docs/SERVING.md, Errors.
 */
public final class ApiException extends RuntimeException {
    private final int status;
    private final String type;
    private final String param;
    private final String code;
    private final Optional<Integer> retryAfterSeconds;

    private ApiException(
            int status, String type, String message, String param, String code, Optional<Integer> retryAfter) {
        super(message);
        this.status = status;
        this.type = type;
        this.param = param;
        this.code = code;
        this.retryAfterSeconds = retryAfter;
    }

    /** 400: the body is wrong; {@code param} names the field (may be null). */
    public static ApiException badRequest(String message, String param) {
        return new ApiException(400, "invalid_request_error", message, param, null, Optional.empty());
    }

    /** 400 with OpenAI's code {@code context_length_exceeded}, which clients look for to trim a conversation. */
    public static ApiException contextLengthExceeded(String message, String param) {
        return new ApiException(
                400, "invalid_request_error", message, param, "context_length_exceeded", Optional.empty());
    }

    public static ApiException unauthorized(String message) {
        return new ApiException(401, "authentication_error", message, null, "invalid_api_key", Optional.empty());
    }

    /** 403: the request may not be served from where it came (a Host this server does not answer to). */
    public static ApiException forbidden(String message, String code) {
        return new ApiException(403, "permission_error", message, null, code, Optional.empty());
    }

    public static ApiException notFound(String message, String param, String code) {
        return new ApiException(404, "invalid_request_error", message, param, code, Optional.empty());
    }

    public static ApiException payloadTooLarge(long limit) {
        return new ApiException(
                413,
                "invalid_request_error",
                "the request body is larger than the server accepts (" + limit + " bytes; see --max-body)",
                null,
                "request_too_large",
                Optional.empty());
    }

    /** 415: a body that is not sent as {@code application/json}. */
    public static ApiException unsupportedMediaType(String message) {
        return new ApiException(
                415, "invalid_request_error", message, null, "unsupported_media_type", Optional.empty());
    }

    /** 408: the request body stopped arriving (the connection's read timeout passed). */
    public static ApiException requestTimeout(String message) {
        return new ApiException(408, "invalid_request_error", message, null, "request_timeout", Optional.empty());
    }

    /** 503 with {@code Retry-After}: the model is loading or every slot and queue place is taken. */
    public static ApiException unavailable(String message, int retryAfterSeconds) {
        return new ApiException(503, "unavailable_error", message, null, null, Optional.of(retryAfterSeconds));
    }

    /** 500: a bug on the server's side, never a client's mistake. */
    public static ApiException internal(String message) {
        return new ApiException(500, "server_error", message, null, null, Optional.empty());
    }

    public int status() {
        return status;
    }

    public String type() {
        return type;
    }

    public String param() {
        return param;
    }

    public String code() {
        return code;
    }

    public Optional<Integer> retryAfterSeconds() {
        return retryAfterSeconds;
    }
}
