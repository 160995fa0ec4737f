package dev.glimmer.server;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.restassured.path.json.JsonPath;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Follow-up requests reuse the KV cache of the conversation they continue. */
class SessionReuseTest {
    static final int CHUNK = 128;
    static GlimmerApp app;

    @BeforeAll
    static void start() {
        app = TestServer.start(Map.of("model.ctx", "4096", "inference.prompt-chunk", String.valueOf(CHUNK)));
    }

    @AfterAll
    static void stop() {
        app.close();
    }

    static JsonPath post(String path, Object body) {
        return given().port(app.port())
                .contentType("application/json")
                .body(body)
                .post(path)
                .then()
                .statusCode(200)
                .extract()
                .jsonPath();
    }

    static List<Integer> tokenize(String text) {
        return post("/tokenize", Map.of("content", text)).getList("tokens", Integer.class);
    }

    /**
     * A 2,000-token prompt, then the same prompt followed by {@code <|user|>} and a few more tokens:
     * the second request processes only the new tokens. {@code <|user|>} ends generation, so the first
     * request cannot have generated it: the shared prefix is exactly the first prompt.
     */
    @Test
    void aFollowUpOfALongConversationProcessesOnlyTheNewTokens() {
        List<Integer> first = new ArrayList<>();
        while (first.size() < 2000) {
            first.addAll(tokenize("The quick brown fox jumps over the lazy dog, again and again. "));
        }
        JsonPath r1 = post("/v1/completions", Map.of("prompt", first, "max_tokens", 4, "temperature", 0));
        assertEquals(first.size(), r1.getInt("usage.prompt_tokens"));
        assertEquals(first.size(), r1.getInt("timings.prompt_n"));

        List<Integer> second = new ArrayList<>(first);
        second.addAll(tokenize("<|user|>And then?<|assistant|>"));
        JsonPath r2 = post("/v1/completions", Map.of("prompt", second, "max_tokens", 4, "temperature", 0));
        assertEquals(first.size(), r2.getInt("usage.prompt_tokens_details.cached_tokens"));
        assertEquals(first.size(), r2.getInt("timings.cache_n"));
        assertEquals(second.size() - first.size(), r2.getInt("timings.prompt_n"));
    }

    /** A long prompt is processed in chunks; the stream sends {@code : ping} frames meanwhile. */
    @Test
    void longPromptsAreProcessedInChunksWithPings() throws Exception {
        List<Integer> prompt = longPrompt(4 * CHUNK + 10, "A story about wolves and the moon, told slowly. ");
        String body = given().port(app.port())
                .contentType("application/json")
                .body(Map.of("prompt", prompt, "max_tokens", 2, "temperature", 0, "stream", true))
                .post("/v1/completions")
                .then()
                .statusCode(200)
                .extract()
                .asString();
        Sse.events(body);
        long pings = body.lines().filter(": ping"::equals).count();
        assertTrue(pings >= 4, "one ping per processed chunk but the last: " + pings);
    }

    /**
     * A client that leaves while its prompt is processed stops the processing within a chunk or two
     * (a write to a closed connection fails on the second attempt), as the count of processed prompt
     * tokens shows.
     */
    @Test
    void aClientLeavingDuringThePromptStopsItsProcessing() throws Exception {
        List<Integer> prompt = longPrompt(12 * CHUNK, "Rivers run to the sea; the sea does not fill. ");
        double before = promptTokensProcessed();
        String request = new com.fasterxml.jackson.databind.ObjectMapper()
                .writeValueAsString(Map.of("prompt", prompt, "max_tokens", 2, "temperature", 0, "stream", true));
        try (java.net.Socket socket = new java.net.Socket("127.0.0.1", app.port())) {
            byte[] bytes = request.getBytes(java.nio.charset.StandardCharsets.UTF_8);
            socket.getOutputStream()
                    .write(("POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n"
                                    + "Content-Type: application/json\r\nContent-Length: " + bytes.length + "\r\n\r\n")
                            .getBytes(java.nio.charset.StandardCharsets.US_ASCII));
            socket.getOutputStream().write(bytes);
            var in = new java.io.BufferedReader(
                    new java.io.InputStreamReader(socket.getInputStream(), java.nio.charset.StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null && !line.equals(": ping")) {
                // headers, then the first ping after the first chunk
            }
        }
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (app.host().require().scheduler().admitted() > 0 && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        double processed = promptTokensProcessed() - before;
        assertTrue(
                processed >= 2 * CHUNK && processed <= 6 * CHUNK,
                "processed before stopping: " + processed + " of " + prompt.size());
        assertEquals(0, processed % CHUNK, "stopped at a chunk boundary");
    }

    static double promptTokensProcessed() {
        String metrics = given().port(app.port())
                .get("/metrics")
                .then()
                .statusCode(200)
                .extract()
                .asString();
        return metrics.lines()
                .filter(l -> l.startsWith("glimmer_prompt_tokens_total "))
                .mapToDouble(l -> Double.parseDouble(l.split(" ")[1]))
                .findFirst()
                .orElseThrow();
    }

    static List<Integer> longPrompt(int tokens, String sentence) {
        List<Integer> prompt = new ArrayList<>();
        List<Integer> piece = tokenize(sentence);
        while (prompt.size() < tokens) {
            prompt.addAll(piece);
        }
        return prompt.subList(0, tokens);
    }

    /** A chat follow-up shares at least the whole previous prompt (the template renders history unchanged). */
    @Test
    void aChatFollowUpReusesThePreviousPrompt() {
        Map<String, Object> turn1 = Map.of("role", "user", "content", "Tell me about foxes.");
        Map<String, Object> off = Map.of("enable_thinking", false);
        JsonPath r1 = post(
                "/v1/chat/completions",
                Map.of("messages", List.of(turn1), "max_tokens", 8, "temperature", 0, "chat_template_kwargs", off));
        int previous = r1.getInt("usage.prompt_tokens");
        String reply = r1.getString("choices[0].message.content");
        List<Object> messages = List.of(
                turn1,
                Map.of("role", "assistant", "content", reply),
                Map.of("role", "user", "content", "And about wolves?"));
        JsonPath r2 = post(
                "/v1/chat/completions",
                Map.of("messages", messages, "max_tokens", 8, "temperature", 0, "chat_template_kwargs", off));
        int cached = r2.getInt("usage.prompt_tokens_details.cached_tokens");
        assertTrue(cached >= previous, "cached " + cached + " < previous prompt " + previous);
        assertEquals(r2.getInt("usage.prompt_tokens") - cached, r2.getInt("timings.prompt_n"));
    }
}
