package dev.glimmer.server;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.containsString;
import static org.hamcrest.Matchers.equalTo;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.restassured.response.ValidatableResponse;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Every client mistake gets an OpenAI error object with the right status, never a 500. */
class RequestErrorsTest {
    static GlimmerApp app;

    @BeforeAll
    static void start() {
        app = TestServer.start(Map.of("server.max-body", "64K", "model.ctx", "256"));
    }

    @AfterAll
    static void stop() {
        app.close();
    }

    static ValidatableResponse post(String path, String body) {
        return given().port(app.port())
                .contentType("application/json")
                .body(body)
                .post(path)
                .then();
    }

    static ValidatableResponse chat(String body) {
        return post("/v1/chat/completions", body);
    }

    static void badRequest(ValidatableResponse r, String param, String message) {
        r.statusCode(400)
                .contentType("application/json")
                .body("error.type", equalTo("invalid_request_error"))
                .body("error.param", equalTo(param))
                .body("error.message", containsString(message));
    }

    @Test
    void invalidJson() {
        badRequest(chat("{\"messages\": ["), null, "the body is not valid JSON");
        badRequest(chat(""), null, "the body is empty");
        badRequest(chat("[1,2]"), null, "the body must be a JSON object, got array");
    }

    /**
     * A body that is not JSON gets a 400 that says where, in the client's terms, on every API: no word of
     * the parser's own (its source description, its feature and constraint names).
     */
    @Test
    void badJsonSaysTheLineAndColumnWithoutTheParsersInternals() {
        Map<String, String> bodies = new java.util.LinkedHashMap<>();
        bodies.put("{\"messages\": [", "line 1, column 15");
        bodies.put("{\"model\": \"x\",\n \"messages\": [}", "line 2, column 15");
        bodies.put("{model: 1}", "line 1, column 2");
        bodies.put("{\"a\": \"unterminated", "line 1, column 20");
        bodies.put("{\"a\": 1" + "1".repeat(2000) + "}", "line 1, column ");
        bodies.put("{\"messages\": " + "[".repeat(5000) + "]".repeat(5000) + "}", "nesting depth");
        for (String path : List.of("/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages")) {
            for (Map.Entry<String, String> body : bodies.entrySet()) {
                var error = post(path, body.getKey())
                        .statusCode(400)
                        .contentType("application/json")
                        .extract()
                        .jsonPath();
                String message = error.getString("error.message");
                String what = path + " "
                        + body.getKey().substring(0, Math.min(40, body.getKey().length())) + ": " + message;
                assertTrue(message.startsWith("the body is not valid JSON at line "), what);
                assertTrue(message.contains(body.getValue()), what);
                for (String internal : List.of("Source", "REDACTED", "StreamRead", "`", "[", "\n")) {
                    assertFalse(message.contains(internal), "'" + internal + "' in " + what);
                }
            }
        }
    }

    /** Jackson refuses nesting past 1,000 levels; that refusal is the client's mistake, not a 500. */
    @Test
    void deeplyNestedBodiesAre400() {
        String deep = "[".repeat(5000) + "]".repeat(5000);
        badRequest(chat("{\"messages\": " + deep + "}"), null, "nesting depth");
        badRequest(post("/v1/completions", "{\"prompt\": " + deep + "}"), null, "nesting depth");
        badRequest(
                post("/tokenize", "{\"content\": " + "{\"a\": ".repeat(5000) + "1" + "}".repeat(5000) + "}"),
                null,
                "nesting depth");
    }

    @Test
    void messagesMustBeANonEmptyArrayOfKnownRoles() {
        badRequest(chat("{}"), "messages", "messages");
        badRequest(chat("{\"messages\": \"hi\"}"), "messages", "messages");
        badRequest(chat("{\"messages\": []}"), "messages", "messages");
        badRequest(
                chat("{\"messages\": [{\"role\": \"bot\", \"content\": \"hi\"}]}"), "messages", "unknown role 'bot'");
    }

    // One case per line, written out, so that the message each field gets is read in the test itself.
    @Test
    void wrongTypesNameTheField() {
        String msgs = "\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]";
        badRequest(
                chat("{" + msgs + ", \"temperature\": \"hot\"}"),
                "temperature",
                "temperature must be a number, got a string");
        badRequest(chat("{" + msgs + ", \"stream\": \"yes\"}"), "stream", "stream must be a boolean");
        badRequest(chat("{" + msgs + ", \"stop\": 5}"), "stop", "stop must be a string or an array of strings");
        badRequest(chat("{" + msgs + ", \"top_p\": 1.5}"), "top_p", "top_p must be in (0, 1]");
        badRequest(
                chat("{" + msgs + ", \"logit_bias\": {\"abc\": 1}}"),
                "logit_bias",
                "logit_bias keys must be token ids");
        badRequest(chat("{" + msgs + ", \"logit_bias\": {\"5000\": 1}}"), "logit_bias", "beyond the vocabulary");
        badRequest(chat("{" + msgs + ", \"top_logprobs\": 3}"), "top_logprobs", "top_logprobs needs logprobs: true");
        badRequest(chat("{" + msgs + ", \"reasoning_effort\": \"extreme\"}"), "reasoning_effort", "reasoning_effort");
    }

    @Test
    void negativeOrAbsurdMaxTokens() {
        String msgs = "\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]";
        badRequest(
                chat("{" + msgs + ", \"max_tokens\": -1}"),
                "max_tokens",
                "max_tokens must be between 1 and 16777216, got -1");
        badRequest(chat("{" + msgs + ", \"max_tokens\": 0}"), "max_tokens", "got 0");
        badRequest(
                chat("{" + msgs + ", \"max_completion_tokens\": 99999999999}"),
                "max_completion_tokens",
                "between 1 and");
        badRequest(chat("{" + msgs + ", \"max_tokens\": 2.5}"), "max_tokens", "max_tokens must be an integer");
    }

    @Test
    void unsupportedFeaturesAreRefusedClearly() {
        String msgs = "\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]";
        badRequest(chat("{" + msgs + ", \"n\": 9}"), "n", "n must be between 1 and 8, got 9");
        badRequest(
                chat("{" + msgs + ", \"response_format\": {\"type\": \"yaml\"}}"),
                "response_format",
                "response_format.type must be text, json_object or json_schema, got 'yaml'");
        badRequest(
                post("/v1/completions", "{\"prompt\": \"hi\", \"response_format\": {\"type\": \"json_object\"}}"),
                "response_format",
                "response_format json_object is supported on /v1/chat/completions only");
        badRequest(
                chat("{" + msgs + ", \"tool_choice\": \"required\"}"),
                "tool_choice",
                "tool_choice \"required\" needs tools to call; the request has none");
        badRequest(chat("{" + msgs + ", \"tool_choice\": \"sometimes\"}"), "tool_choice", "tool_choice must be");
    }

    @Test
    void promptsLongerThanTheContextSayBothNumbers() {
        String longText = "word ".repeat(400);
        chat("{\"messages\": [{\"role\": \"user\", \"content\": \"" + longText + "\"}]}")
                .statusCode(400)
                .body("error.code", equalTo("context_length_exceeded"))
                .body("error.param", equalTo("messages"))
                .body("error.message", containsString("but the context holds 256"))
                .body("error.message", containsString("the prompt has "))
                .body("error.message", containsString("or start the server with a larger --ctx (up to 4096)"));
        post("/v1/completions", "{\"prompt\": \"" + longText + "\"}")
                .statusCode(400)
                .body("error.message", containsString("but the context holds 256"))
                .body("error.code", equalTo("context_length_exceeded"));
    }

    @Test
    void bodiesOverTheLimitAre413() {
        String big = "{\"prompt\": \"" + "x".repeat(70 * 1024) + "\"}";
        post("/v1/completions", big)
                .statusCode(413)
                .body("error.code", equalTo("request_too_large"))
                .body("error.message", containsString("65536 bytes"));
    }

    /** One model is served: any name a client sends means it (as llama-server and LM Studio do); responses name the real id. */
    @Test
    void anyModelNameIsTheServedModel() {
        chat("{\"model\": \"gpt-4o\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 2}")
                .statusCode(200)
                .body("model", equalTo("tiny-f32"));
        post("/v1/completions", "{\"model\": \"gpt-4o\", \"prompt\": \"hi\", \"max_tokens\": 2}")
                .statusCode(200)
                .body("model", equalTo("tiny-f32"));
        badRequest(
                chat("{\"model\": 4, \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}"),
                "model",
                "model must be a string");
        // The catalogue lists what is served.
        given().port(app.port())
                .get("/v1/models/gpt-4o")
                .then()
                .statusCode(404)
                .body("error.code", equalTo("model_not_found"));
    }

    @Test
    void completionPromptsAreChecked() {
        badRequest(post("/v1/completions", "{}"), "prompt", "prompt is required");
        badRequest(
                post("/v1/completions", "{\"prompt\": 5}"),
                "prompt",
                "prompt must be a string or an array of token ids");
        badRequest(post("/v1/completions", "{\"prompt\": [1, -2]}"), "prompt", "prompt[1] must be a token id");
        badRequest(
                post("/v1/completions", "{\"prompt\": [\"a\", 5]}"),
                "prompt",
                "prompt[1] must be a string or an array");
        badRequest(
                post("/v1/completions", "{\"prompt\": [[1], [2, -3]]}"), "prompt", "prompt[1][1] must be a token id");
        badRequest(post("/v1/completions", "{\"prompt\": [\"a\", \"\"]}"), "prompt", "prompt[1] must not be empty");
        badRequest(
                post("/v1/completions", "{\"prompt\": [" + "\"a\", ".repeat(16) + "\"a\"]}"), "prompt", "at most 16");
        badRequest(post("/v1/completions", "{\"prompt\": [1, 99999]}"), "prompt", "beyond the vocabulary");
        badRequest(post("/v1/completions", "{\"prompt\": \"\"}"), "prompt", "prompt must not be empty");
        badRequest(post("/v1/completions", "{\"prompt\": \"hi\", \"logprobs\": 9}"), "logprobs", "between 0 and 5");
    }

    @Test
    void tokenizerHelpersCheckTheirInput() {
        badRequest(post("/tokenize", "{\"content\": 5}"), "content", "content must be a string");
        badRequest(post("/detokenize", "{\"tokens\": [1, 100000]}"), "tokens", "tokens[1] must be a token id");
        badRequest(post("/apply-template", "{\"messages\": []}"), "messages", "messages");
    }
}
