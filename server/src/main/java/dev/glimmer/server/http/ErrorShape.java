package dev.glimmer.server.http;

import com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * The error object a route's clients expect. OpenAI's
 * {@code {"error":{"message","type","param","code"}}} everywhere except under {@code /v1/messages},
 * whose Anthropic clients read {@code {"type":"error","error":{"type","message"}}} with Anthropic's
 * error types.
 */
public enum ErrorShape {
    OPENAI,
    ANTHROPIC;

    /** The shape for a request path. */
    public static ErrorShape of(String path) {
        return path.equals("/v1/messages") || path.startsWith("/v1/messages/") ? ANTHROPIC : OPENAI;
    }

    /** The error object of {@code e}. */
    public ObjectNode body(ApiException e) {
        ObjectNode root = Json.object();
        if (this == OPENAI) {
            ObjectNode error = root.putObject("error");
            error.put("message", e.getMessage());
            error.put("type", e.type());
            error.put("param", e.param());
            error.put("code", e.code());
        } else {
            root.put("type", "error");
            ObjectNode error = root.putObject("error");
            error.put("type", anthropicType(e.status()));
            error.put("message", e.getMessage());
        }
        return root;
    }

    /** Anthropic's error types by HTTP status (its SDKs map them back to exception classes). */
    private static String anthropicType(int status) {
        return switch (status) {
            case 400, 415 -> "invalid_request_error";
            case 401 -> "authentication_error";
            case 403 -> "permission_error";
            case 404 -> "not_found_error";
            case 413 -> "request_too_large";
            case 429 -> "rate_limit_error";
            case 503 -> "overloaded_error";
            default -> "api_error";
        };
    }
}
