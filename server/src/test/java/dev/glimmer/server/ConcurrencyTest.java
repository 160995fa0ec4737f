package dev.glimmer.server;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.containsString;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Sixteen streaming clients at once (2 decode slots, 14 waiting), four of which hang up after a few
 * chunks: the others get complete, correct streams, the four generations stop (counted as cancelled),
 * and afterwards no slot, queue place, session or handler is held.
 */
class ConcurrencyTest {
    static final int CLIENTS = 16;
    static final int QUITTERS = 4;
    static final String MESSAGES =
            "\"messages\": [{\"role\": \"user\", \"content\": \"Hello, world! Tell me a story about a fox.\"}]";

    static GlimmerApp app;

    @BeforeAll
    static void start() {
        app = TestServer.start(Map.of("model.ctx", "2048", "inference.parallel", "2", "inference.queue", "16"));
    }

    @AfterAll
    static void stop() {
        app.close();
    }

    @Test
    void sixteenStreamsSomeOfWhichHangUp() throws Exception {
        String complete = "{" + MESSAGES + ", \"temperature\": 0, \"max_tokens\": 16, \"stream\": true,"
                + " \"stream_options\": {\"include_usage\": true}}";
        // The quitters would generate for a long time: end-of-generation tokens are banned and the limit is high.
        String endless = "{" + MESSAGES + ", \"temperature\": 0, \"max_tokens\": 1500, \"stream\": true,"
                + " \"logit_bias\": {\"960\": -100, \"967\": -100, \"969\": -100}}";
        String reference = reasoningAndContent(Sse.events(post(complete)));

        List<Callable<String>> clients = new ArrayList<>();
        for (int i = 0; i < CLIENTS; i++) {
            clients.add(
                    i % (CLIENTS / QUITTERS) == 0
                            ? () -> hangUpAfterChunks(app.port(), endless, 3)
                            : () -> post(complete));
        }
        try (ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor()) {
            List<Future<String>> results = pool.invokeAll(clients);
            for (int i = 0; i < CLIENTS; i++) {
                String body = results.get(i).get();
                if (i % (CLIENTS / QUITTERS) != 0) {
                    List<JsonNode> events = Sse.events(body);
                    assertEquals(reference, reasoningAndContent(events), "client " + i);
                    assertEquals(
                            16, events.getLast().at("/usage/completion_tokens").asInt());
                }
            }
        }

        // Everything is released (the scheduler notices the last hang-ups within a token).
        long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        while ((app.host().require().scheduler().admitted() > 0 || metric("glimmer_http_handlers_active") > 1)
                && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertEquals(0, app.host().require().scheduler().admitted(), "no slot or queue place left taken");
        assertEquals(0, app.host().require().sessions().sessionsInUse(), "no session left in use");
        given().port(app.port())
                .get("/metrics")
                .then()
                .statusCode(200)
                .body(containsString("glimmer_requests_cancelled_total " + QUITTERS + ".0"))
                .body(containsString("glimmer_requests_processing 0.0"))
                .body(containsString("glimmer_requests_deferred 0.0"))
                // Only the handler of this very request is running: none was left behind.
                .body(containsString("glimmer_http_handlers_active 1.0"));
        // Two sequences shared decode steps (continuous batching), never more than --parallel.
        assertEquals(2.0, metric("glimmer_decode_batch_size_max"));
        // Each quitter would have generated 1500 tokens; it stopped within a few of its hang-up.
        double predicted = metric("glimmer_tokens_predicted_total");
        assertTrue(predicted <= (CLIENTS - QUITTERS + 1) * 16 + QUITTERS * 40, "tokens generated: " + predicted);
        // The server still serves.
        assertEquals(reference, reasoningAndContent(Sse.events(post(complete))));
    }

    static String post(String body) throws Exception {
        try (HttpClient http = HttpClient.newHttpClient()) {
            HttpRequest request = HttpRequest.newBuilder(
                            URI.create("http://127.0.0.1:" + app.port() + "/v1/chat/completions"))
                    .header("Content-Type", "application/json")
                    .POST(HttpRequest.BodyPublishers.ofString(body))
                    .build();
            HttpResponse<String> response = http.send(request, HttpResponse.BodyHandlers.ofString());
            assertEquals(200, response.statusCode(), response.body());
            return response.body();
        }
    }

    /** Sends a streaming request to {@code port} on a raw socket, reads {@code chunks} data frames, then closes the connection. */
    static String hangUpAfterChunks(int port, String body, int chunks) throws Exception {
        try (Socket socket = new Socket("127.0.0.1", port)) {
            byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
            OutputStream out = socket.getOutputStream();
            out.write(("POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                            + "Content-Length: " + bytes.length + "\r\n\r\n")
                    .getBytes(StandardCharsets.US_ASCII));
            out.write(bytes);
            out.flush();
            BufferedReader in =
                    new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
            int seen = 0;
            String line;
            while (seen < chunks && (line = in.readLine()) != null) {
                if (line.startsWith("data: ")) {
                    seen++;
                }
            }
            assertEquals(chunks, seen);
        }
        return "";
    }

    static String reasoningAndContent(List<JsonNode> events) {
        StringBuilder text = new StringBuilder();
        for (JsonNode e : events) {
            JsonNode delta = e.at("/choices/0/delta");
            if (delta.has("reasoning_content")) {
                text.append("R:").append(delta.get("reasoning_content").asText());
            }
            if (delta.has("content") && !delta.get("content").isNull()) {
                text.append("C:").append(delta.get("content").asText());
            }
        }
        return text.toString();
    }

    static double metric(String name) {
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
}
