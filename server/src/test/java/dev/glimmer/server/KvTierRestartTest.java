package dev.glimmer.server;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.restassured.path.json.JsonPath;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The disk tier through real servers: a conversation cached before a restart continues after it with its old tokens
 * in {@code cached_tokens}, and with the reply it would have had computing them.
 */
class KvTierRestartTest {

    static GlimmerApp start(Path dir) {
        return TestServer.start(
                Map.of("model.ctx", "1024", "inference.cache-dir", dir.toString(), "inference.cache-disk-mb", "64"));
    }

    static JsonPath complete(GlimmerApp app, List<Integer> prompt) {
        return given().port(app.port())
                .contentType("application/json")
                .body(Map.of("prompt", prompt, "max_tokens", 6, "temperature", 0))
                .post("/v1/completions")
                .then()
                .statusCode(200)
                .extract()
                .jsonPath();
    }

    static List<Integer> tokenize(GlimmerApp app, String text) {
        return given().port(app.port())
                .contentType("application/json")
                .body(Map.of("content", text))
                .post("/tokenize")
                .then()
                .statusCode(200)
                .extract()
                .jsonPath()
                .getList("tokens", Integer.class);
    }

    @Test
    void aRestartedServerContinuesAConversationFromDisk(@TempDir Path dir) {
        List<Integer> history = new ArrayList<>();
        List<Integer> followUp;
        String computed;
        GlimmerApp first = start(dir);
        try {
            while (history.size() < 300) {
                history.addAll(tokenize(first, "An agent reads the repository and plans its change. "));
            }
            followUp = new ArrayList<>(history);
            followUp.addAll(tokenize(first, "<|user|>Go on.<|assistant|>"));
            JsonPath r = complete(first, followUp);
            assertEquals(0, r.getInt("usage.prompt_tokens_details.cached_tokens"));
            computed = r.getString("choices[0].text");
            complete(first, history); // another conversation, sharing the history (copied from the first)
        } finally {
            first.close(); // the idle conversations go to disk
        }
        GlimmerApp second = start(dir);
        try {
            JsonPath r = complete(second, followUp);
            assertEquals(followUp.size() - 1, r.getInt("usage.prompt_tokens_details.cached_tokens"));
            assertEquals(1, r.getInt("timings.prompt_n"));
            assertEquals(computed, r.getString("choices[0].text"), "the reply it had when it computed the history");
            String metrics =
                    given().port(second.port()).get("/metrics").then().extract().asString();
            assertTrue(metrics.contains("glimmer_prefix_hits_total{source=\"disk\"} 1.0"), metrics);
        } finally {
            second.close();
        }
    }
}
