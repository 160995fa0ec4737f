package dev.glimmer.server;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.containsString;
import static org.hamcrest.Matchers.emptyOrNullString;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.not;
import static org.hamcrest.Matchers.nullValue;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.config.ServerConfigLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Without a model, serve writes the demo model once to the cache directory and says it is random. */
class DemoModelTest {

    @Test
    void theDemoModelIsWrittenOnceAndAnnounced(@TempDir Path cache) throws Exception {
        ServerConfig config =
                ServerConfigLoader.load(Optional.empty(), Map.of(), Map.of("server.port", "0", "model.ctx", "512"));
        Map<String, String> env = Map.of("XDG_CACHE_HOME", cache.toString());
        Path file = cache.resolve("glimmer").resolve("glimmer-demo-tiny-f32-seed42.gguf");
        FileTime written;
        try (GlimmerApp app = GlimmerApp.start(config, env)) {
            app.awaitLoaded();
            assertTrue(Files.isRegularFile(file));
            written = Files.getLastModifiedTime(file);
            given().port(app.port())
                    .get("/v1/models")
                    .then()
                    .statusCode(200)
                    .body("data[0].id", equalTo("glimmer-demo-tiny-f32-seed42"))
                    .body("data[0].meta.demo", equalTo(true))
                    .body("data[0].meta.note", containsString("random weights"))
                    .body("data[0].meta.note", containsString("stops after 128 tokens"))
                    .body("data[0].meta.note", containsString("thinks only when asked"))
                    .body("data[0].meta.default_max_tokens", equalTo(128));
            // Random weights rarely end an answer: without max_tokens it stops after 128 tokens, not at the
            // context's end. (The end-of-generation tokens are banned here, so that it runs into the limit.)
            List<Integer> ends = given().port(app.port())
                    .contentType("application/json")
                    .body("{\"content\": \"<|endoftext|><|user|><|observation|>\"}")
                    .post("/tokenize")
                    .then()
                    .statusCode(200)
                    .extract()
                    .jsonPath()
                    .getList("tokens", Integer.class);
            String bans = ends.stream().map(id -> "\"" + id + "\": -100").collect(Collectors.joining(", "));
            given().port(app.port())
                    .contentType("application/json")
                    .body("{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"logit_bias\": {" + bans + "}}")
                    .post("/v1/chat/completions")
                    .then()
                    .statusCode(200)
                    .body("usage.completion_tokens", equalTo(128))
                    .body("choices[0].finish_reason", equalTo("length"));
            given().port(app.port())
                    .contentType("application/json")
                    .body("{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 5}")
                    .post("/v1/chat/completions")
                    .then()
                    .statusCode(200)
                    .body("usage.completion_tokens", equalTo(5));
        }
        try (GlimmerApp again = GlimmerApp.start(config, env)) {
            again.awaitLoaded();
            given().port(again.port()).get("/health").then().statusCode(200);
        }
        assertEquals(written, Files.getLastModifiedTime(file), "written once, reused afterwards");
    }

    /**
     * The demo model does not think unless asked (its random weights never close a thought): the README's first
     * chat example has visible content, as do the Responses and Messages APIs; a request that asks still thinks.
     */
    @Test
    void theDemoModelAnswersWithoutThinkingUnlessAsked(@TempDir Path cache) throws Exception {
        ServerConfig config = ServerConfigLoader.load(Optional.empty(), Map.of(), Map.of("server.port", "0"));
        List<String> log = new java.util.concurrent.CopyOnWriteArrayList<>();
        java.util.logging.Handler logged = new java.util.logging.Handler() {
            @Override
            public void publish(java.util.logging.LogRecord record) {
                log.add(record.getMessage());
            }

            @Override
            public void flush() {}

            @Override
            public void close() {}
        };
        java.util.logging.Logger servedModelLog =
                java.util.logging.Logger.getLogger(dev.glimmer.server.inference.ServedModel.class.getName());
        servedModelLog.addHandler(logged);
        try (GlimmerApp app = GlimmerApp.start(config, Map.of("XDG_CACHE_HOME", cache.toString()))) {
            app.awaitLoaded();
            // No --ctx: the model's own 4096 tokens, without a note that a default of 8192 was cut.
            given().port(app.port()).get("/v1/models").then().statusCode(200).body("data[0].meta.n_ctx", equalTo(4096));
            assertTrue(log.stream().noneMatch(line -> line.contains("more than")), log.toString());
            // A prompt longer than the model's whole context: a larger --ctx would not help, so it is not suggested.
            given().port(app.port())
                    .contentType("application/json")
                    .body("{\"messages\":[{\"role\":\"user\",\"content\":\"" + "word ".repeat(5000) + "\"}]}")
                    .post("/v1/chat/completions")
                    .then()
                    .statusCode(400)
                    .body("error.code", equalTo("context_length_exceeded"))
                    .body("error.message", not(containsString("--ctx")))
                    .body("error.message", containsString("but the context holds 4096; shorten it"));
            String story = "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a story about a fox.\"}],"
                    + "\"max_tokens\":32,\"temperature\":0";
            given().port(app.port())
                    .contentType("application/json")
                    .body(story + "}")
                    .post("/v1/chat/completions")
                    .then()
                    .statusCode(200)
                    .body("choices[0].message.content", not(emptyOrNullString()))
                    .body("choices[0].message.reasoning_content", nullValue());
            given().port(app.port())
                    .contentType("application/json")
                    .body(story + ",\"reasoning_effort\":\"high\"}")
                    .post("/v1/chat/completions")
                    .then()
                    .statusCode(200)
                    .body("choices[0].message.reasoning_content", not(emptyOrNullString()));
            given().port(app.port())
                    .contentType("application/json")
                    .body("{\"input\":\"Tell me a story about a fox.\",\"max_output_tokens\":32,\"temperature\":0}")
                    .post("/v1/responses")
                    .then()
                    .statusCode(200)
                    .body("output.type", equalTo(List.of("message")))
                    .body("output[0].content[0].text", not(emptyOrNullString()));
            given().port(app.port())
                    .contentType("application/json")
                    .body("{\"model\":\"glm\",\"max_tokens\":32,\"temperature\":0,"
                            + "\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a story about a fox.\"}]}")
                    .post("/v1/messages")
                    .then()
                    .statusCode(200)
                    .body("content.type", equalTo(List.of("text")))
                    .body("content[0].text", not(emptyOrNullString()));
            // The template shows what the model sees: an empty thought, closed before the answer.
            given().port(app.port())
                    .contentType("application/json")
                    .body("{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}")
                    .post("/apply-template")
                    .then()
                    .statusCode(200)
                    .body("prompt", org.hamcrest.Matchers.endsWith("</think>"));
        } finally {
            servedModelLog.removeHandler(logged);
        }
    }
}
