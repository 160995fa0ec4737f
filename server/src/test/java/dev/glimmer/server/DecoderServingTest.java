package dev.glimmer.server;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.containsString;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.choice.BackendChoice;
import dev.glimmer.engine.backend.emulated.EmulatorRunner;
import io.restassured.path.json.JsonPath;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Serving on a backend whose sequences are token decoders holding their own KV cache, as the GPU
 * backends are: here the GPU decode step on the CPU kernel emulator (the real {@code .metal} kernels and
 * command lists; needs clang-19), one KV pool whose slots hold the cached conversations and whose running
 * ones step together through the batch decode list. Its greedy output is the CPU path's and llama.cpp's,
 * follow-ups reuse a conversation's slot (truncated to the shared prefix), and concurrent clients, one of which
 * hangs up, leave nothing behind.
 */
class DecoderServingTest {
    static final String HELLO =
            "\"messages\": [{\"role\": \"user\", \"content\": \"Hello, world! Tell me a story about a fox.\"}]";

    /** The server on the emulated GPU decoder, and the CPU server it is compared with. */
    static GlimmerApp gpu;

    static GlimmerApp cpu;

    @BeforeAll
    static void start() {
        Map<String, String> config = Map.of("model.ctx", "256", "inference.parallel", "2", "inference.queue", "8");
        gpu = TestServer.start(
                config,
                (requested, model, cpu) -> new BackendChoice(
                        BackendKind.EMULATED,
                        "the GPU decode step on the CPU kernel emulator",
                        Optional.empty(),
                        EmulatorRunner.pools(model)));
        cpu = TestServer.start(config);
    }

    @AfterAll
    static void stop() {
        if (gpu != null) {
            gpu.close();
        }
        if (cpu != null) {
            cpu.close();
        }
    }

    static JsonPath post(GlimmerApp app, String path, Object body) {
        return given().port(app.port())
                .contentType("application/json")
                .body(body)
                .post(path)
                .then()
                .statusCode(200)
                .extract()
                .jsonPath();
    }

    static String stream(GlimmerApp app, String body) {
        return given().port(app.port())
                .contentType("application/json")
                .body(body)
                .post("/v1/chat/completions")
                .then()
                .statusCode(200)
                .extract()
                .asString();
    }

    @Test
    void theModelsRouteNamesTheBackendAndWhy() {
        given().port(gpu.port())
                .get("/v1/models")
                .then()
                .statusCode(200)
                .body("data[0].meta.backend", org.hamcrest.Matchers.equalTo("emulated"))
                .body(
                        "data[0].meta.backend_reason",
                        org.hamcrest.Matchers.equalTo("the GPU decode step on the CPU kernel emulator"));
        given().port(cpu.port())
                .get("/v1/models")
                .then()
                .statusCode(200)
                .body("data[0].meta.backend", org.hamcrest.Matchers.equalTo("cpu"))
                .body("data[0].meta.backend_reason", org.hamcrest.Matchers.equalTo("asked for with --backend cpu"));
    }

    /**
     * The oracle's chat prompt, streamed at temperature 0: the same reasoning and content as on the
     * CPU, and the same tokens as llama.cpp's greedy run (asked for by token ids, which also reuses the
     * chat's cached prompt: the decoder is cut back from the 32 generated tokens to the shared prefix).
     */
    @Test
    void greedyStreamedChatIsTheCpuPathsAndLlamaCpps() throws Exception {
        JsonNode oracle = new ObjectMapper()
                .readTree(EngineTestData.ORACLE
                        .resolve("refs/tiny-f32.logits.json")
                        .toFile())
                .get("cases")
                .get(0);
        int greedy = oracle.get("greedy_tokens").size();
        String request = "{" + HELLO + ", \"temperature\": 0, \"max_tokens\": " + greedy + ", \"stream\": true,"
                + " \"stream_options\": {\"include_usage\": true}}";
        List<JsonNode> onGpu = Sse.events(stream(gpu, request));
        List<JsonNode> onCpu = Sse.events(stream(cpu, request));
        assertEquals(ConcurrencyTest.reasoningAndContent(onCpu), ConcurrencyTest.reasoningAndContent(onGpu));
        assertEquals(greedy, onGpu.getLast().at("/usage/completion_tokens").asInt());

        String expected = post(gpu, "/detokenize", "{\"tokens\": " + oracle.get("greedy_tokens") + "}")
                .getString("content");
        JsonPath byIds = post(
                gpu,
                "/v1/completions",
                "{\"prompt\": " + oracle.get("prompt_tokens") + ", \"temperature\": 0, \"max_tokens\": " + greedy
                        + "}");
        assertEquals(expected, byIds.getString("choices[0].text"));
        int prompt = oracle.get("prompt_tokens").size();
        assertEquals(
                prompt - 1, byIds.getInt("usage.prompt_tokens_details.cached_tokens"), "the chat's prompt was reused");
        assertEquals(1, byIds.getInt("timings.prompt_n"));
    }

    /**
     * A follow-up that continues a conversation processes only its new tokens on the conversation's
     * decoder, which held the first reply too (cut off here: {@code <|user|>} follows the prompt), and
     * answers what a fresh CPU sequence answers.
     */
    @Test
    void aFollowUpReusesTheConversationsDecoder() {
        List<Integer> first = new ArrayList<>();
        while (first.size() < 40) {
            first.addAll(post(gpu, "/tokenize", Map.of("content", "The quick brown fox jumps over the lazy dog. "))
                    .getList("tokens", Integer.class));
        }
        JsonPath r1 = post(gpu, "/v1/completions", Map.of("prompt", first, "max_tokens", 4, "temperature", 0));
        assertEquals(first.size(), r1.getInt("timings.prompt_n"));

        List<Integer> second = new ArrayList<>(first);
        second.addAll(post(gpu, "/tokenize", Map.of("content", "<|user|>And then?<|assistant|>"))
                .getList("tokens", Integer.class));
        Map<String, Object> followUp = Map.of("prompt", second, "max_tokens", 6, "temperature", 0);
        JsonPath r2 = post(gpu, "/v1/completions", followUp);
        assertEquals(first.size(), r2.getInt("usage.prompt_tokens_details.cached_tokens"));
        assertEquals(second.size() - first.size(), r2.getInt("timings.prompt_n"));
        assertEquals(
                post(cpu, "/v1/completions", followUp).getString("choices[0].text"), r2.getString("choices[0].text"));
    }

    /**
     * Four streaming clients on two decode slots, one of which hangs up after a few chunks while
     * generating without end: the others get the reference answer, two sequences shared decode steps,
     * and afterwards no slot, queue place, session or handler is held.
     */
    @Test
    void concurrentClientsAndAHangUpLeaveNothingBehind() throws Exception {
        String complete = "{" + HELLO + ", \"temperature\": 0, \"max_tokens\": 8, \"stream\": true}";
        String endless = "{" + HELLO + ", \"temperature\": 0, \"max_tokens\": 200, \"stream\": true,"
                + " \"logit_bias\": {\"960\": -100, \"967\": -100, \"969\": -100}}";
        String reference = ConcurrencyTest.reasoningAndContent(Sse.events(stream(cpu, complete)));
        double cancelledBefore = metric("glimmer_requests_cancelled_total");
        List<Callable<String>> clients = List.of(
                () -> ConcurrencyTest.hangUpAfterChunks(gpu.port(), endless, 3),
                () -> stream(gpu, complete),
                () -> stream(gpu, complete),
                () -> stream(gpu, complete));
        try (ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor()) {
            List<Future<String>> results = pool.invokeAll(clients);
            for (int i = 1; i < clients.size(); i++) {
                assertEquals(
                        reference,
                        ConcurrencyTest.reasoningAndContent(
                                Sse.events(results.get(i).get())),
                        "client " + i);
            }
            results.getFirst().get();
        }
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while ((gpu.host().require().scheduler().admitted() > 0 || metric("glimmer_http_handlers_active") > 1)
                && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertEquals(0, gpu.host().require().scheduler().admitted(), "no slot or queue place left taken");
        assertEquals(0, gpu.host().require().sessions().sessionsInUse(), "no session left in use");
        assertEquals(cancelledBefore + 1, metric("glimmer_requests_cancelled_total"));
        given().port(gpu.port())
                .get("/metrics")
                .then()
                .statusCode(200)
                .body(containsString("glimmer_requests_processing 0.0"))
                .body(containsString("glimmer_requests_deferred 0.0"))
                .body(containsString("glimmer_http_handlers_active 1.0"));
        assertEquals(2.0, metric("glimmer_decode_batch_size_max"), "two sequences stepped in one turn");
        assertTrue(
                gpu.host().require().sessions().bytesUsed()
                        <= gpu.host().require().sessions().budgetBytes(),
                "the idle decoders are back within the KV budget");
        assertEquals(
                reference, ConcurrencyTest.reasoningAndContent(Sse.events(stream(gpu, complete))), "still serving");
    }

    static double metric(String name) {
        return metric(gpu, name);
    }

    static double metric(GlimmerApp app, String name) {
        String text = given().port(app.port())
                .get("/metrics")
                .then()
                .statusCode(200)
                .extract()
                .asString();
        return text.lines()
                .filter(l -> l.startsWith(name + " "))
                .mapToDouble(l -> Double.parseDouble(l.split(" ")[1]))
                .findFirst()
                .orElseThrow(() -> new AssertionError("no metric " + name));
    }

    /**
     * {@code /metrics} shows the pool's use (issue #19): its slots (--parallel 2 and room for 2 more conversations, as
     * no --kv-budget is set), those holding a cached conversation (one per session), and its memory (the KV budget
     * is its slots' KV rows; the activations of its command lists come on top). The CPU server has no pool.
     */
    @Test
    void theMetricsShowTheKvPoolsSlotsAndMemory() throws InterruptedException {
        post(gpu, "/v1/completions", Map.of("prompt", "Once upon a time", "max_tokens", 2, "temperature", 0));
        // The scheduler updates the gauges just after the response's last byte.
        long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while ((gpu.host().require().scheduler().admitted() > 0
                        || metric("glimmer_kv_pool_slots_used") != metric("glimmer_sessions_cached"))
                && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertEquals(4.0, metric("glimmer_kv_pool_slots"));
        double used = metric("glimmer_kv_pool_slots_used");
        assertTrue(used >= 1 && used <= 4, "slots used " + used);
        assertEquals(metric("glimmer_sessions_cached"), used, "a slot per cached conversation");
        assertEquals(
                metric("glimmer_kv_cache_budget_bytes"),
                4 * metric("glimmer_kv_cache_used_bytes") / used,
                "the budget is the pool's slots");
        assertTrue(
                metric("glimmer_kv_pool_bytes") > metric("glimmer_kv_cache_budget_bytes"), "KV pool and activations");

        post(cpu, "/v1/completions", Map.of("prompt", "Once upon a time", "max_tokens", 2, "temperature", 0));
        String onCpu = given().port(cpu.port())
                .get("/metrics")
                .then()
                .statusCode(200)
                .extract()
                .asString();
        assertTrue(onCpu.contains("glimmer_sessions_cached "), "the CPU's KV metrics");
        assertFalse(onCpu.contains("glimmer_kv_pool"), "no pool on the CPU");
    }

    /** The token masks of constrained decoding apply to a decoder's logits as to the CPU pass's. */
    @Test
    void aJsonSchemaConstrainsTheDecoderAsTheCpu() {
        String schema = "{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":\"boolean\"},\"n\":{\"type\":"
                + "\"integer\",\"minimum\":0,\"maximum\":99}},\"required\":[\"ok\",\"n\"]}";
        String body = "{" + HELLO + ", \"temperature\": 0, \"max_tokens\": 24, \"reasoning_effort\": \"none\","
                + " \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"r\", \"schema\": "
                + schema + "}}}";
        String onGpu = post(gpu, "/v1/chat/completions", body).getString("choices[0].message.content");
        String onCpu = post(cpu, "/v1/chat/completions", body).getString("choices[0].message.content");
        ConstrainedOutputTest.assertValid(ConstrainedOutputTest.schema(schema), onGpu);
        assertEquals(onCpu, onGpu);
    }
}
