package dev.glimmer.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The names the Gateway API Inference Extension's endpoint picker and vLLM's dashboards read, through a real server
 * under real load: their types, their label sets, and their values moving as requests queue, run and end
 * (docs/SCALE_OUT.md, "What the endpoint picker reads").
 */
class VllmMetricsContractTest {
    static final int PARALLEL = 2;
    static final int WAITING = 2;
    static final int SHORT_TOKENS = 16;
    static final int CTX = 2048;
    static final ObjectMapper JSON = new ObjectMapper();

    static GlimmerApp app;
    static HttpClient http;
    static String modelId;

    @BeforeAll
    static void start() throws Exception {
        app = TestServer.start(Map.of(
                "model.ctx",
                Integer.toString(CTX),
                "inference.parallel",
                Integer.toString(PARALLEL),
                "inference.queue",
                "8"));
        http = HttpClient.newHttpClient();
        modelId = JSON.readTree(get("/v1/models")).at("/data/0/id").asText();
    }

    @AfterAll
    static void stop() {
        // Streams a failed assertion left open must not hold the client's close.
        http.shutdownNow();
        app.close();
    }

    @Test
    void theEndpointPickersMetricsMoveUnderLoad() throws Exception {
        PrometheusText idle = scrape();
        Map<String, String> model = Map.of("model_name", modelId);
        assertEquals(0, idle.value("vllm:num_requests_running", model));
        assertEquals(0, idle.value("vllm:num_requests_waiting", model));
        assertEquals(0, idle.value("vllm:kv_cache_usage_perc", model));
        PrometheusText.Sample config = idle.all("vllm:cache_config_info").getFirst();
        int blockSize = Integer.parseInt(config.labels().get("block_size"));
        long blocks = Long.parseLong(config.labels().get("num_gpu_blocks"));
        assertEquals(modelId, config.labels().get("model_name"));
        assertEquals(1, config.value());
        long slots = blocks * blockSize / CTX;
        assertEquals(slots * CTX, blocks * blockSize, "the KV memory is whole conversations of the context");
        assertTrue(slots >= PARALLEL, "every running request has a slot: " + slots);

        // Two endless streams take both slots and two short requests wait behind them; whatever the machine's speed,
        // the endless ones run until their clients hang up (abort), and then the short ones run to their limit.
        String messages = "\"messages\": [{\"role\": \"user\", \"content\": \"Tell me a story about a fox.\"}]";
        String endless = "{" + messages + ", \"temperature\": 0, \"max_tokens\": 1500, \"stream\": true,"
                + " \"logit_bias\": {\"960\": -100, \"967\": -100, \"969\": -100}}";
        String shortOne = "{" + messages + ", \"temperature\": 0, \"max_tokens\": " + SHORT_TOKENS + ","
                + " \"logit_bias\": {\"960\": -100, \"967\": -100, \"969\": -100}}";
        List<InputStream> endlessBodies = new ArrayList<>();
        for (int i = 0; i < PARALLEL; i++) {
            HttpResponse<InputStream> r =
                    http.send(post("/v1/chat/completions", endless), HttpResponse.BodyHandlers.ofInputStream());
            assertEquals(200, r.statusCode());
            r.body().read(new byte[64]); // its first chunk: it runs
            endlessBodies.add(r.body());
        }
        List<CompletableFuture<HttpResponse<String>>> shortOnes = new ArrayList<>();
        for (int i = 0; i < WAITING; i++) {
            shortOnes.add(http.sendAsync(post("/v1/chat/completions", shortOne), HttpResponse.BodyHandlers.ofString()));
        }
        PrometheusText busy = scrape();
        long deadline = System.nanoTime() + 30_000_000_000L;
        while ((busy.value("vllm:num_requests_running", model) < PARALLEL
                        || busy.value("vllm:num_requests_waiting", model) < WAITING)
                && System.nanoTime() < deadline) {
            Thread.sleep(5);
            busy = scrape();
        }
        assertEquals(PARALLEL, busy.value("vllm:num_requests_running", model));
        assertEquals(WAITING, busy.value("vllm:num_requests_waiting", model));
        assertEquals((double) PARALLEL / slots, busy.value("vllm:kv_cache_usage_perc", model), 1e-9);

        for (InputStream body : endlessBodies) {
            body.close(); // the client hangs up
        }
        for (CompletableFuture<HttpResponse<String>> r : shortOnes) {
            HttpResponse<String> response = r.get();
            assertEquals(200, response.statusCode(), response.body());
            JsonNode reply = JSON.readTree(response.body());
            assertEquals("length", reply.at("/choices/0/finish_reason").asText());
            assertEquals(SHORT_TOKENS, reply.at("/usage/completion_tokens").asInt());
        }
        PrometheusText after = scrapeWhenIdle();
        assertEquals(0, after.value("vllm:kv_cache_usage_perc", model));
        assertEquals(
                WAITING,
                after.value("vllm:request_success_total", Map.of("model_name", modelId, "finished_reason", "length")));
        assertEquals(
                PARALLEL,
                after.value("vllm:request_success_total", Map.of("model_name", modelId, "finished_reason", "abort")));
        int requests = PARALLEL + WAITING;
        assertEquals(requests, after.value("vllm:time_to_first_token_seconds_count", model));
        assertEquals(requests, after.value("vllm:e2e_request_latency_seconds_count", model));
        // Every token is a first token or follows one.
        double tokens = after.value("vllm:generation_tokens_total", model);
        assertEquals(tokens, requests + after.value("vllm:inter_token_latency_seconds_count", model));
        assertTrue(tokens >= WAITING * SHORT_TOKENS + PARALLEL, "tokens: " + tokens);
        assertTrue(after.value("vllm:time_to_first_token_seconds_sum", model) > 0);
        assertEquals(
                requests,
                after.value("vllm:time_to_first_token_seconds_bucket", Map.of("model_name", modelId, "le", "+Inf")));

        // The same prompt again finds all but its last token in the prefix cache.
        String once = "{\"messages\": [{\"role\": \"user\", \"content\": \"Tell me a story about a fox.\"}],"
                + " \"temperature\": 0, \"max_tokens\": 2}";
        double queriesBefore = after.value("vllm:prefix_cache_queries_total", model);
        double hitsBefore = after.value("vllm:prefix_cache_hits_total", model);
        JsonNode reply =
                JSON.readTree(http.send(post("/v1/chat/completions", once), HttpResponse.BodyHandlers.ofString())
                        .body());
        int promptTokens = reply.at("/usage/prompt_tokens").asInt();
        PrometheusText reused = scrapeWhenIdle();
        assertEquals(queriesBefore + promptTokens, reused.value("vllm:prefix_cache_queries_total", model));
        assertEquals(hitsBefore + promptTokens - 1, reused.value("vllm:prefix_cache_hits_total", model));

        assertTypesAndLabels(reused);
    }

    /** Each name has vLLM's type, and its series carry exactly vLLM's labels (with le on histogram buckets). */
    static void assertTypesAndLabels(PrometheusText scrape) {
        Map<String, String> types = Map.ofEntries(
                Map.entry("vllm:num_requests_running", "gauge"),
                Map.entry("vllm:num_requests_waiting", "gauge"),
                Map.entry("vllm:kv_cache_usage_perc", "gauge"),
                Map.entry("vllm:cache_config_info", "gauge"),
                Map.entry("vllm:prefix_cache_queries_total", "counter"),
                Map.entry("vllm:prefix_cache_hits_total", "counter"),
                Map.entry("vllm:prompt_tokens_total", "counter"),
                Map.entry("vllm:generation_tokens_total", "counter"),
                Map.entry("vllm:request_success_total", "counter"),
                Map.entry("vllm:time_to_first_token_seconds", "histogram"),
                Map.entry("vllm:inter_token_latency_seconds", "histogram"),
                Map.entry("vllm:e2e_request_latency_seconds", "histogram"));
        for (Map.Entry<String, String> e : types.entrySet()) {
            String family = e.getKey().endsWith("_total")
                    ? e.getKey().substring(0, e.getKey().length() - 6)
                    : e.getKey();
            String declared =
                    scrape.types().getOrDefault(e.getKey(), scrape.types().get(family));
            assertEquals(e.getValue(), declared, "# TYPE of " + e.getKey());
        }
        Set<String> names = scrape.samples().stream()
                .map(PrometheusText.Sample::name)
                .filter(n -> n.startsWith("vllm:"))
                .collect(Collectors.toSet());
        for (String name : names) {
            Set<Set<String>> labelSets =
                    scrape.all(name).stream().map(s -> s.labels().keySet()).collect(Collectors.toSet());
            Set<String> expected = name.equals("vllm:request_success_total")
                    ? Set.of("model_name", "finished_reason")
                    : name.endsWith("_bucket")
                            ? Set.of("model_name", "le")
                            : name.equals("vllm:cache_config_info")
                                    ? Set.of("model_name", "block_size", "num_gpu_blocks", "enable_prefix_caching")
                                    : Set.of("model_name");
            assertEquals(Set.of(expected), labelSets, "labels of " + name);
            for (PrometheusText.Sample s : scrape.all(name)) {
                assertEquals(modelId, s.labels().get("model_name"), name);
            }
        }
        assertTrue(
                names.containsAll(types.keySet().stream()
                        .filter(n -> !n.endsWith("_seconds"))
                        .toList()),
                names.toString());
    }

    /** A scrape once nothing runs or waits any more (the gauges follow the scheduler's turn). */
    static PrometheusText scrapeWhenIdle() throws Exception {
        long deadline = System.nanoTime() + 10_000_000_000L;
        PrometheusText now = scrape();
        Map<String, String> model = Map.of("model_name", modelId);
        while ((now.value("vllm:num_requests_running", model) > 0 || now.value("vllm:num_requests_waiting", model) > 0)
                && System.nanoTime() < deadline) {
            Thread.sleep(10);
            now = scrape();
        }
        assertEquals(0, now.value("vllm:num_requests_running", model));
        assertEquals(0, now.value("vllm:num_requests_waiting", model));
        return now;
    }

    static PrometheusText scrape() throws Exception {
        return PrometheusText.parse(get("/metrics"));
    }

    static String get(String path) throws Exception {
        HttpResponse<String> r =
                http.send(HttpRequest.newBuilder(uri(path)).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), path);
        return r.body();
    }

    static HttpRequest post(String path, String body) {
        return HttpRequest.newBuilder(uri(path))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(body))
                .build();
    }

    static URI uri(String path) {
        return URI.create("http://127.0.0.1:" + app.port() + path);
    }
}
