package dev.glimmer.server;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.containsString;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.greaterThan;
import static org.hamcrest.Matchers.nullValue;
import static org.hamcrest.Matchers.startsWith;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.inference.ModelHost;
import dev.glimmer.server.metrics.ServerMetrics;
import io.restassured.specification.RequestSpecification;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Routes that need no generation: health, models, metrics, errors, API key (CORS: CorsTest). */
class HttpBasicsTest {
    static GlimmerApp app;
    static GlimmerApp keyed;

    @BeforeAll
    static void start() {
        app = TestServer.start(Map.of());
        keyed = TestServer.start(Map.of("server.api-key", "sesame"));
    }

    @AfterAll
    static void stop() {
        app.close();
        keyed.close();
    }

    static RequestSpecification plain() {
        return given().port(app.port());
    }

    @Test
    void healthIsOkOnceLoaded() {
        plain().get("/health")
                .then()
                .statusCode(200)
                .contentType("application/json")
                .body("status", equalTo("ok"));
    }

    @Test
    void healthIs503WhileLoading() {
        ServerConfig config = TestServer.config(Map.of());
        ModelHost loading = new ModelHost();
        loading.progress("reading weights");
        try (ServerMetrics metrics = new ServerMetrics();
                GlimmerServer server = GlimmerServer.start(config, loading, metrics)) {
            given().port(server.port())
                    .get("/health")
                    .then()
                    .statusCode(503)
                    .header("Retry-After", "5")
                    .body("error.type", equalTo("unavailable_error"))
                    .body("error.message", containsString("loading (reading weights)"));
            given().port(server.port()).get("/v1/models").then().statusCode(503);
        }
    }

    @Test
    void healthSaysWhyTheModelFailedToLoad() {
        // A file that is not GGUF (one of llama.cpp's reference files).
        String notGguf =
                EngineTestData.ORACLE.resolve("refs/tiny-f32.logits.json").toString();
        try (GlimmerApp failed = TestServer.start(Map.of("model.path", notGguf))) {
            given().port(failed.port())
                    .get("/health")
                    .then()
                    .statusCode(503)
                    .body("error.message", startsWith("the model failed to load: "))
                    .body("error.message", containsString("tiny-f32.logits.json"));
        }
    }

    @Test
    void modelsListTheServedModelWithItsFacts() {
        plain().get("/v1/models")
                .then()
                .statusCode(200)
                .body("object", equalTo("list"))
                .body("data.size()", equalTo(1))
                .body("data[0].id", equalTo("tiny-f32"))
                .body("data[0].object", equalTo("model"))
                .body("data[0].owned_by", equalTo("glimmer"))
                .body("data[0].created", greaterThan(0))
                .body("data[0].meta.n_ctx", equalTo(1024))
                .body("data[0].meta.quant", equalTo("F32"))
                .body("data[0].meta.demo", equalTo(false))
                .body("data[0].meta.backend", equalTo("cpu"))
                .body("data[0].meta.backend_reason", equalTo("asked for with --backend cpu"));
        plain().get("/v1/models/tiny-f32").then().statusCode(200).body("id", equalTo("tiny-f32"));
    }

    @Test
    void unknownModelIs404() {
        plain().get("/v1/models/gpt-4")
                .then()
                .statusCode(404)
                .body("error.type", equalTo("invalid_request_error"))
                .body("error.code", equalTo("model_not_found"))
                .body("error.param", equalTo("model"))
                .body("error.message", equalTo("the model 'gpt-4' does not exist; this server serves 'tiny-f32'"));
    }

    @Test
    void unknownRouteIs404WithAnErrorObject() {
        plain().get("/v2/nothing")
                .then()
                .statusCode(404)
                .contentType("application/json")
                .body("error.message", equalTo("no route GET /v2/nothing (see README.md: API)"))
                .body("error.param", nullValue());
    }

    @Test
    void metricsArePrometheusTextWithJvmAndRequestCounts() {
        plain().get("/health").then().statusCode(200);
        plain().get("/metrics")
                .then()
                .statusCode(200)
                .header("Content-Type", startsWith("text/plain; version=0.0.4"))
                .body(containsString("glimmer_http_requests_total{route=\"/health\",status=\"200\"}"))
                .body(containsString("jvm_memory_used_bytes"))
                .body(containsString("glimmer_requests_processing"))
                .body(containsString("glimmer_time_to_first_token_seconds_bucket"));
    }

    @Test
    void theApiKeyIsRequiredEverywhereButHealthAndTheWebChatFiles() {
        given().port(keyed.port()).get("/health").then().statusCode(200);
        // The page must load so that its settings can ask for the key.
        given().port(keyed.port()).get("/").then().statusCode(200);
        given().port(keyed.port()).get("/app.js").then().statusCode(200);
        given().port(keyed.port()).post("/v1/chat/completions").then().statusCode(401);
        given().port(keyed.port()).get("/tokenize.js").then().statusCode(404);
        given().port(keyed.port())
                .get("/v1/models")
                .then()
                .statusCode(401)
                .body("error.type", equalTo("authentication_error"))
                .body("error.message", containsString("Authorization: Bearer"));
        given().port(keyed.port())
                .header("Authorization", "Bearer wrong")
                .get("/v1/models")
                .then()
                .statusCode(401)
                .body("error.message", equalTo("the API key is not valid"));
        given().port(keyed.port())
                .header("Authorization", "Basic c2VzYW1l")
                .get("/metrics")
                .then()
                .statusCode(401);
        given().port(keyed.port())
                .header("Authorization", "Bearer sesame")
                .get("/v1/models")
                .then()
                .statusCode(200);
        // Anthropic clients send the key in x-api-key.
        given().port(keyed.port())
                .header("x-api-key", "sesame")
                .get("/v1/models")
                .then()
                .statusCode(200);
        given().port(keyed.port())
                .header("x-api-key", "wrong")
                .get("/v1/models")
                .then()
                .statusCode(401)
                .body("error.message", equalTo("the API key is not valid"));
        // Under /v1/messages, errors are Anthropic's error objects.
        given().port(keyed.port())
                .post("/v1/messages")
                .then()
                .statusCode(401)
                .body("type", equalTo("error"))
                .body("error.type", equalTo("authentication_error"))
                .body("error.message", containsString("x-api-key"));
    }

    /** Clients whose base URL lacks /v1 reach the same routes; unknown paths are still 404 naming what was asked. */
    @Test
    void openAiRoutesAnswerWithoutV1() {
        plain().get("/models").then().statusCode(200).body("data[0].id", equalTo("tiny-f32"));
        plain().get("/models/tiny-f32").then().statusCode(200).body("id", equalTo("tiny-f32"));
        plain().contentType("application/json")
                .body("{\"prompt\": \"hi\", \"max_tokens\": 1}")
                .post("/completions")
                .then()
                .statusCode(200)
                .body("object", equalTo("text_completion"));
        plain().get("/nowhere").then().statusCode(404).body("error.message", containsString("no route GET /nowhere "));
        plain().get("/v1/nowhere")
                .then()
                .statusCode(404)
                .body("error.message", containsString("no route GET /v1/nowhere "));
        // Counted once (the filters do not run again for the /v1 route): the scrape before, and the one request.
        double before = requestsTotal();
        plain().get("/models").then().statusCode(200);
        assertEquals(before + 2, requestsTotal());
    }

    private static double requestsTotal() {
        return plain().get("/metrics")
                .then()
                .statusCode(200)
                .extract()
                .asString()
                .lines()
                .filter(l -> l.startsWith("glimmer_http_requests_total{"))
                .mapToDouble(l -> Double.parseDouble(l.substring(l.lastIndexOf(' ') + 1)))
                .sum();
    }

    @Test
    void applyTemplateCanLeaveOutTheGenerationPrompt() {
        String messages = "\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]";
        plain().contentType("application/json")
                .body("{" + messages + "}")
                .post("/apply-template")
                .then()
                .statusCode(200)
                .body("prompt", equalTo("[gMASK]<sop><|user|>hi<|assistant|><think>"));
        plain().contentType("application/json")
                .body("{" + messages + ", \"add_generation_prompt\": false}")
                .post("/apply-template")
                .then()
                .statusCode(200)
                .body("prompt", equalTo("[gMASK]<sop><|user|>hi"));
    }
}
