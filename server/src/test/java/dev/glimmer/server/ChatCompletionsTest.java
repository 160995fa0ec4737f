package dev.glimmer.server;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.greaterThan;
import static org.hamcrest.Matchers.startsWith;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.restassured.path.json.JsonPath;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Chat and text completions over HTTP: response shapes, the SSE framing, usage, the helper routes. */
class ChatCompletionsTest {
    static GlimmerApp app;

    static final String HELLO =
            "{\"messages\": [{\"role\": \"user\", \"content\": \"Hello, world! Tell me a story about a fox.\"}],"
                    + " \"temperature\": 0, \"max_tokens\": 12";

    @BeforeAll
    static void start() {
        app = TestServer.start(Map.of());
    }

    @AfterAll
    static void stop() {
        app.close();
    }

    static JsonPath post(String path, String body) {
        return given().port(app.port())
                .contentType("application/json")
                .body(body)
                .post(path)
                .then()
                .statusCode(200)
                .contentType("application/json")
                .extract()
                .jsonPath();
    }

    static String stream(String path, String body) {
        return given().port(app.port())
                .contentType("application/json")
                .body(body)
                .post(path)
                .then()
                .statusCode(200)
                .header("Content-Type", startsWith("text/event-stream"))
                .extract()
                .asString();
    }

    @Test
    void nonStreamingChatHasTheOpenAiShape() {
        JsonPath r = post("/v1/chat/completions", HELLO + "}");
        assertTrue(r.getString("id").startsWith("chatcmpl-"));
        assertEquals("chat.completion", r.getString("object"));
        assertEquals("tiny-f32", r.getString("model"));
        assertEquals(0, r.getInt("choices[0].index"));
        assertEquals("assistant", r.getString("choices[0].message.role"));
        assertEquals(12, r.getInt("usage.completion_tokens"));
        assertEquals("length", r.getString("choices[0].finish_reason"));
        int prompt = r.getInt("usage.prompt_tokens");
        assertEquals(24, prompt, "the oracle's chat prompt has 24 tokens on tiny");
        assertEquals(prompt + 12, r.getInt("usage.total_tokens"));
        assertEquals(prompt - r.getInt("usage.prompt_tokens_details.cached_tokens"), r.getInt("timings.prompt_n"));
        assertEquals(12, r.getInt("timings.predicted_n"));
        // Thinking is on: the generation starts inside the reasoning, which has not ended after 12 tokens.
        String reasoning = r.getString("choices[0].message.reasoning_content");
        String content = r.getString("choices[0].message.content");
        assertTrue(reasoning != null && !reasoning.isEmpty() || !content.isEmpty());
    }

    @Test
    void streamingFramesAreExactAndCarryTheSameTextAsTheWholeResponse() throws Exception {
        JsonPath whole = post("/v1/chat/completions", HELLO + "}");
        String body = stream("/v1/chat/completions", HELLO + ", \"stream\": true}");
        List<JsonNode> events = Sse.events(body);
        JsonNode first = events.getFirst();
        assertEquals("chat.completion.chunk", first.get("object").asText());
        assertEquals(
                "{\"role\":\"assistant\",\"content\":null}",
                first.at("/choices/0/delta").toString());
        StringBuilder reasoning = new StringBuilder();
        StringBuilder content = new StringBuilder();
        for (JsonNode e : events.subList(1, events.size() - 1)) {
            assertEquals(first.get("id"), e.get("id"), "all chunks share the id");
            assertEquals(first.get("created"), e.get("created"));
            JsonNode delta = e.at("/choices/0/delta");
            assertTrue(e.at("/choices/0/finish_reason").isNull());
            if (delta.has("reasoning_content")) {
                reasoning.append(delta.get("reasoning_content").asText());
            } else {
                content.append(delta.get("content").asText());
            }
        }
        JsonNode last = events.getLast();
        assertEquals("length", last.at("/choices/0/finish_reason").asText());
        assertEquals("{}", last.at("/choices/0/delta").toString());
        assertFalse(body.contains("\"usage\""), "no usage chunk unless asked for");
        // The first and the last frames, byte for byte.
        String head =
                "data: {\"id\":\"" + first.get("id").asText() + "\",\"object\":\"chat.completion.chunk\",\"created\":"
                        + first.get("created").asLong() + ",\"model\":\"tiny-f32\",\"system_fingerprint\":\""
                        + first.get("system_fingerprint").asText() + "\",\"choices\":[{\"index\":0,\"delta\":";
        assertTrue(
                body.startsWith(head + "{\"role\":\"assistant\",\"content\":null},\"logprobs\":null,"
                        + "\"finish_reason\":null}]}\n\n"),
                body);
        assertTrue(
                body.endsWith(head + "{},\"logprobs\":null,\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n"), body);
        assertEquals(whole.getString("choices[0].message.content"), content.toString());
        String wholeReasoning = whole.getString("choices[0].message.reasoning_content");
        assertEquals(wholeReasoning == null ? "" : wholeReasoning, reasoning.toString());
    }

    @Test
    void theUsageChunkComesOnlyWhenAskedFor() throws Exception {
        String body = stream(
                "/v1/chat/completions", HELLO + ", \"stream\": true, \"stream_options\": {\"include_usage\": true}}");
        List<JsonNode> events = Sse.events(body);
        JsonNode usage = events.getLast();
        assertEquals(0, usage.get("choices").size());
        assertEquals(12, usage.at("/usage/completion_tokens").asInt());
        assertEquals(24, usage.at("/usage/prompt_tokens").asInt());
        assertEquals(
                "length",
                events.get(events.size() - 2).at("/choices/0/finish_reason").asText());
    }

    @Test
    void theSameSeedGivesTheSameSample() {
        String sampled = "{\"prompt\": \"Once upon a time\", \"max_tokens\": 16, \"temperature\": 1.5, \"top_k\": 0,"
                + " \"top_p\": 1, \"min_p\": 0, \"seed\": ";
        String first = post("/v1/completions", sampled + "7}").getString("choices[0].text");
        assertEquals(first, post("/v1/completions", sampled + "7}").getString("choices[0].text"));
        String greedy = post(
                        "/v1/completions", "{\"prompt\": \"Once upon a time\", \"max_tokens\": 16, \"temperature\": 0}")
                .getString("choices[0].text");
        assertFalse(
                first.equals(greedy)
                        && post("/v1/completions", sampled + "8}")
                                .getString("choices[0].text")
                                .equals(first),
                "temperature is not ignored");
    }

    @Test
    void thinkingOffPutsEverythingInContent() {
        JsonPath r = post("/v1/chat/completions", HELLO + ", \"chat_template_kwargs\": {\"enable_thinking\": false}}");
        assertEquals(null, r.getString("choices[0].message.reasoning_content"));
        JsonPath same = post("/v1/chat/completions", HELLO + ", \"reasoning_effort\": \"none\"}");
        assertEquals(r.getString("choices[0].message.content"), same.getString("choices[0].message.content"));
    }

    @Test
    void greedyCompletionReproducesLlamaCppOnTheOraclePrompt() throws Exception {
        JsonNode oracle = new com.fasterxml.jackson.databind.ObjectMapper()
                .readTree(EngineTestData.ORACLE
                        .resolve("refs/tiny-f32.logits.json")
                        .toFile())
                .get("cases")
                .get(0);
        String ids = oracle.get("prompt_tokens").toString();
        String expected = post("/detokenize", "{\"tokens\": " + oracle.get("greedy_tokens") + "}")
                .getString("content");
        JsonPath r = post(
                "/v1/completions",
                "{\"prompt\": " + ids + ", \"temperature\": 0, \"max_tokens\": "
                        + oracle.get("greedy_tokens").size() + "}");
        assertEquals(expected, r.getString("choices[0].text"));
        // The same prompt as text, through the chat template, gives the same tokens.
        JsonPath chat = post(
                "/apply-template",
                "{\"messages\": [{\"role\": \"user\", \"content\": "
                        + "\"Hello, world! Tell me a story about a fox.\"}]}");
        assertEquals(oracle.get("prompt_text").asText(), chat.getString("prompt"));
    }

    /** At temperature 0 the server writes what {@code ./glimmer generate} writes for the same prompt. */
    @Test
    void greedyOutputEqualsTheGenerateCommands() throws Exception {
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        java.io.ByteArrayOutputStream err = new java.io.ByteArrayOutputStream();
        int code = dev.glimmer.server.cli.Main.run(
                new String[] {
                    "generate",
                    "--model",
                    TestServer.tinyModel().toString(),
                    "--prompt",
                    "Once upon a time",
                    "--max-tokens",
                    "20",
                    "--temperature",
                    "0",
                    "--json"
                },
                new dev.glimmer.server.cli.Terminal(
                        new java.io.PrintStream(out, true, "UTF-8"), new java.io.PrintStream(err, true, "UTF-8")));
        assertEquals(0, code, err.toString(java.nio.charset.StandardCharsets.UTF_8));
        JsonNode generated = new com.fasterxml.jackson.databind.ObjectMapper().readTree(out.toByteArray());
        JsonPath served =
                post("/v1/completions", "{\"prompt\": \"Once upon a time\", \"temperature\": 0, \"max_tokens\": 20}");
        assertEquals(generated.get("text").asText(), served.getString("choices[0].text"));
        assertEquals(generated.get("finish_reason").asText(), served.getString("choices[0].finish_reason"));
        assertEquals(generated.get("tokens").size(), served.getInt("usage.completion_tokens"));
    }

    @Test
    void toolChoiceNoneLeavesTheToolsOut() {
        String tools = ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\","
                + " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}]";
        JsonPath none = post("/v1/chat/completions", HELLO + tools + ", \"tool_choice\": \"none\"}");
        JsonPath without = post("/v1/chat/completions", HELLO + "}");
        JsonPath offered = post("/v1/chat/completions", HELLO + tools + ", \"tool_choice\": \"auto\"}");
        assertEquals(without.getInt("usage.prompt_tokens"), none.getInt("usage.prompt_tokens"));
        assertEquals(
                without.getString("choices[0].message.reasoning_content"),
                none.getString("choices[0].message.reasoning_content"));
        assertTrue(offered.getInt("usage.prompt_tokens") > without.getInt("usage.prompt_tokens"));
    }

    @Test
    void textCompletionsAcceptTextOrTokenIds() {
        JsonPath text =
                post("/v1/completions", "{\"prompt\": \"Once upon a time\", \"temperature\": 0, \"max_tokens\": 8}");
        assertEquals("text_completion", text.getString("object"));
        assertEquals("length", text.getString("choices[0].finish_reason"));
        assertEquals(8, text.getInt("usage.completion_tokens"));
        List<Integer> ids =
                post("/tokenize", "{\"content\": \"Once upon a time\"}").getList("tokens", Integer.class);
        JsonPath byIds = post("/v1/completions", "{\"prompt\": " + ids + ", \"temperature\": 0, \"max_tokens\": 8}");
        assertEquals(text.getString("choices[0].text"), byIds.getString("choices[0].text"));
        assertEquals(ids.size(), byIds.getInt("usage.prompt_tokens"));
    }

    @Test
    void textCompletionStreamsEndWithAFinishChunkAndDone() throws Exception {
        String prompt = "{\"prompt\": \"Once upon a time\", \"temperature\": 0, \"max_tokens\": 8";
        String whole = post("/v1/completions", prompt + "}").getString("choices[0].text");
        List<JsonNode> events = Sse.events(stream("/v1/completions", prompt + ", \"stream\": true}"));
        StringBuilder text = new StringBuilder();
        for (JsonNode e : events) {
            text.append(e.at("/choices/0/text").asText());
        }
        assertEquals(whole, text.toString());
        assertEquals("length", events.getLast().at("/choices/0/finish_reason").asText());
    }

    @Test
    void logprobsReportTheChosenTokensAndAlternatives() {
        // Thinking off: every token is the reply's (the reasoning's have none: ChoicesPrefillLogprobsTest).
        JsonPath r = post(
                "/v1/chat/completions",
                HELLO + ", \"logprobs\": true, \"top_logprobs\": 3,"
                        + " \"chat_template_kwargs\": {\"enable_thinking\": false}}");
        List<Map<String, Object>> content = r.getList("choices[0].logprobs.content");
        assertEquals(12, content.size());
        for (Map<String, Object> entry : content) {
            List<?> top = (List<?>) entry.get("top_logprobs");
            assertEquals(3, top.size());
            // Greedy: the chosen token is the most likely one.
            assertEquals(((Map<?, ?>) top.getFirst()).get("token"), entry.get("token"));
            assertTrue(((Number) entry.get("logprob")).doubleValue() <= 0);
        }
    }

    @Test
    void metricsCountTokensLatenciesAndTheKvCache() {
        post("/v1/chat/completions", HELLO + "}");
        String metrics = given().port(app.port())
                .get("/metrics")
                .then()
                .statusCode(200)
                .extract()
                .asString();
        for (String name : List.of(
                "glimmer_prompt_tokens_total",
                "glimmer_tokens_predicted_total",
                "glimmer_time_to_first_token_seconds_count",
                "glimmer_inter_token_latency_seconds_count",
                "glimmer_prompt_tokens_per_second_count",
                "glimmer_predicted_tokens_per_second_count",
                "glimmer_kv_cache_used_bytes",
                "glimmer_kv_cache_budget_bytes",
                "glimmer_sessions_cached",
                "glimmer_decode_batch_size_count")) {
            double value = metrics.lines()
                    .filter(l -> l.startsWith(name + " "))
                    .mapToDouble(l -> Double.parseDouble(l.substring(name.length() + 1)))
                    .findFirst()
                    .orElse(-1);
            assertTrue(value > 0, name + " = " + value);
        }
        assertTrue(metrics.contains("glimmer_http_requests_total{route=\"/v1/chat/completions\",status=\"200\"}"));
        assertTrue(metrics.contains("glimmer_prompt_tokens_cached_total "));
    }

    @Test
    void tokenizeDetokenizeAndApplyTemplateRoundTrip() {
        String request =
                "{\"messages\": [{\"role\": \"user\", \"content\": \"Hello, world! Tell me a story about a fox.\"}]}";
        String prompt = post("/apply-template", request).getString("prompt");
        assertEquals("[gMASK]<sop><|user|>Hello, world! Tell me a story about a fox.<|assistant|><think>", prompt);
        List<Integer> ids = given().port(app.port())
                .contentType("application/json")
                .body(Map.of("content", prompt))
                .post("/tokenize")
                .then()
                .statusCode(200)
                .body("tokens.size()", equalTo(24))
                .extract()
                .jsonPath()
                .getList("tokens", Integer.class);
        given().port(app.port())
                .contentType("application/json")
                .body(Map.of("tokens", ids))
                .post("/detokenize")
                .then()
                .statusCode(200)
                .body("content", equalTo(prompt));
        given().port(app.port())
                .contentType("application/json")
                .body(Map.of("content", "fox", "with_pieces", true))
                .post("/tokenize")
                .then()
                .statusCode(200)
                .body("tokens[0].piece", startsWith("f"))
                .body("tokens[0].id", greaterThan(-1));
    }
}
