package dev.glimmer.server;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.tokenizer.Tokenizer;
import io.restassured.path.json.JsonPath;
import java.util.Map;
import java.util.SortedSet;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@code ignore_eos} on {@code /v1/completions}, as llama-server accepts it: the end-of-generation tokens are
 * never picked, so a request runs to its max_tokens. The tiny model is pushed towards ending at once by a
 * logit bias on its end-of-generation tokens; ignore_eos must win over that bias.
 */
class IgnoreEosTest {
    static GlimmerApp app;
    static SortedSet<Integer> endOfGeneration;

    @BeforeAll
    static void start() throws Exception {
        try (GgufFile file = GgufFile.open(TestServer.tinyModel())) {
            endOfGeneration =
                    Tokenizer.fromMetadata(file.metadata()).specialTokens().endOfGeneration();
        }
        assertFalse(endOfGeneration.isEmpty(), "the tiny model has end-of-generation tokens");
        app = TestServer.start(Map.of());
    }

    @AfterAll
    static void stop() {
        app.close();
    }

    /** A greedy completion of 12 tokens whose end-of-generation tokens get a bias of +100. */
    static String pushedToEnd(String extra) {
        StringBuilder bias = new StringBuilder();
        for (int token : endOfGeneration) {
            bias.append(bias.isEmpty() ? "" : ", ").append('"').append(token).append("\": 100");
        }
        return "{\"prompt\": \"Once upon a time\", \"max_tokens\": 12, \"temperature\": 0, \"logit_bias\": {" + bias
                + "}" + extra + "}";
    }

    static JsonPath complete(String body) {
        return given().port(app.port())
                .contentType("application/json")
                .body(body)
                .post("/v1/completions")
                .then()
                .statusCode(200)
                .extract()
                .jsonPath();
    }

    @Test
    void withoutIgnoreEosTheBiasedModelStopsAtOnce() {
        JsonPath r = complete(pushedToEnd(""));
        assertEquals("stop", r.getString("choices[0].finish_reason"));
        assertEquals(1, r.getInt("usage.completion_tokens"));
        r = complete(pushedToEnd(", \"ignore_eos\": false"));
        assertEquals(1, r.getInt("usage.completion_tokens"));
    }

    @Test
    void ignoreEosRunsToMaxTokens() {
        JsonPath r = complete(pushedToEnd(", \"ignore_eos\": true"));
        assertEquals("length", r.getString("choices[0].finish_reason"));
        assertEquals(12, r.getInt("usage.completion_tokens"));
        assertFalse(r.getString("choices[0].text").isEmpty());
    }

    @Test
    void ignoreEosHoldsForEveryPromptOfAListAndWhenStreamed() {
        String body = pushedToEnd(
                        ", \"ignore_eos\": true, \"stream\": true, \"stream_options\": {\"include_usage\": true}")
                .replace("\"Once upon a time\"", "[\"Once upon a time\", \"The fox\"]");
        String events = given().port(app.port())
                .contentType("application/json")
                .body(body)
                .post("/v1/completions")
                .then()
                .statusCode(200)
                .extract()
                .asString();
        assertEquals(2, events.split("\"finish_reason\":\"length\"", -1).length - 1, events);
        assertTrue(events.contains("\"completion_tokens\":24"), events);
    }

    @Test
    void ignoreEosMustBeABoolean() {
        String error = given().port(app.port())
                .contentType("application/json")
                .body("{\"prompt\": \"Hi\", \"max_tokens\": 2, \"ignore_eos\": \"yes\"}")
                .post("/v1/completions")
                .then()
                .statusCode(400)
                .extract()
                .jsonPath()
                .getString("error.param");
        assertEquals("ignore_eos", error);
    }
}
