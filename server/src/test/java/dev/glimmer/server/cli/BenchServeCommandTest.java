package dev.glimmer.server.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.glimmer.server.GlimmerApp;
import dev.glimmer.server.TestServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ServerSocket;
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
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@code bench-serve} against a real Glimmer server serving the tiny oracle model on a free port: its counts
 * agree with the server's own counters, its JSON has the documented shape, and a server that is down, refuses
 * the request or goes silent gives a clear one-line reason and a non-zero exit, without hanging.
 */
class BenchServeCommandTest {
    static final String KEY = "sesame";
    static final ObjectMapper JSON = new ObjectMapper();
    /** Ample for a tool that must not hang; a hang would block the build forever without it. */
    static final Duration HANG_GUARD = Duration.ofSeconds(60);

    static GlimmerApp app;
    static String url;

    @BeforeAll
    static void start() {
        app = TestServer.start(Map.of("server.api-key", KEY));
        url = "http://127.0.0.1:" + app.port();
    }

    @AfterAll
    static void stop() {
        app.close();
    }

    @Test
    void countsAgreeWithTheServersOwn() throws Exception {
        double predictedBefore = metric("glimmer_tokens_predicted_total");
        double promptBefore = metric("glimmer_prompt_tokens_total") + metric("glimmer_prompt_tokens_cached_total");

        // A trailing /v1/ is how OpenAI clients spell a base URL: it is accepted.
        MainTest.Result r = MainTest.run(
                "bench-serve",
                "--url",
                url + "/v1/",
                "--api-key",
                KEY,
                "--concurrency",
                "3",
                "--requests",
                "6",
                "--prompt-tokens",
                "48",
                "--max-tokens",
                "8",
                "--json");
        assertEquals(0, r.code(), r.err());
        JsonNode report = JSON.readTree(r.out());
        assertEquals(1, r.out().strip().lines().count(), "one JSON object on one line: " + r.out());

        assertEquals(url, report.get("url").textValue());
        assertEquals("tiny-f32", report.get("model").textValue(), "the model is the first of /v1/models");
        assertEquals(3, report.get("concurrency").intValue());
        assertEquals(6, report.get("requests").intValue());
        assertEquals(48, report.get("prompt_tokens_asked").intValue());
        assertEquals(8, report.get("max_tokens").intValue());
        assertEquals(6, report.get("completed").intValue());
        assertEquals(0, report.get("errors").intValue());
        assertTrue(report.get("first_error").isNull());
        assertTrue(report.get("usage_reported").booleanValue());
        assertEquals(6 * 8, report.get("output_tokens").intValue(), "ignore_eos: every request generates max_tokens");

        long promptTokens = report.get("prompt_tokens").longValue();
        assertTrue(
                promptTokens >= 6 * 48 * 0.75 && promptTokens <= 6 * 48 * 1.25,
                "prompts of about 48 tokens each, calibrated by the warm-up: " + promptTokens);
        JsonNode warmup = report.get("warmup");
        assertEquals(8, warmup.get("output_tokens").intValue());
        assertEquals(
                metric("glimmer_tokens_predicted_total") - predictedBefore,
                report.get("output_tokens").doubleValue()
                        + warmup.get("output_tokens").doubleValue(),
                "the server generated what the report counts, the warm-up included");
        assertEquals(
                metric("glimmer_prompt_tokens_total") + metric("glimmer_prompt_tokens_cached_total") - promptBefore,
                promptTokens + warmup.get("prompt_tokens").doubleValue(),
                "the server read the prompt tokens the report counts, the warm-up included");

        double wall = report.get("wall_s").doubleValue();
        assertTrue(wall > 0, r.out());
        assertEquals(48 / wall, report.get("output_tok_s").doubleValue(), 0.01 * 48 / wall + 0.01);
        assertEquals(6 / wall, report.get("requests_s").doubleValue(), 0.01 * 6 / wall + 0.001);
        for (String latency : List.of("ttft_ms", "itl_ms")) {
            double p50 = report.get(latency).get("p50").doubleValue();
            double p99 = report.get(latency).get("p99").doubleValue();
            assertTrue(p50 > 0 && p50 <= p99, latency + ": " + report.get(latency));
            assertTrue(p99 < wall * 1000, latency + " within the run: " + report.get(latency));
        }
        assertTrue(r.err().contains("model: tiny-f32 (the first of GET /v1/models)"), r.err());
        assertTrue(r.err().contains("bench-serve: 6 of 6 requests ended, 0 failed"), r.err());
    }

    @Test
    void theTableIsForPeople() {
        MainTest.Result r = MainTest.run(
                "bench-serve",
                "--url",
                url,
                "--api-key",
                KEY,
                "--model",
                "any-name",
                "--concurrency",
                "2",
                "--requests",
                "2",
                "--prompt-tokens",
                "16",
                "--max-tokens",
                "4",
                "--seed",
                "7");
        assertEquals(0, r.code(), r.err());
        List<String> lines = r.out().lines().toList();
        assertEquals("server               " + url + ", model any-name", lines.getFirst());
        assertTrue(r.out().contains("requests             2 of 2 completed, 0 failed, 2 at a time"), r.out());
        assertTrue(r.out().contains("output tokens        8 (4 asked per request)"), r.out());
        for (String row : List.of(
                "prompt tokens",
                "wall time",
                "output tok/s",
                "requests/s",
                "time to first token",
                "inter-token latency")) {
            assertTrue(lines.stream().anyMatch(l -> l.startsWith(row + " ")), row + " missing in\n" + r.out());
        }
        assertTrue(r.out().matches("(?s).*time to first token  p50 [0-9.]+ ms, p99 [0-9.]+ ms\n.*"), r.out());
    }

    @Test
    void aRefusedRequestIsCountedWithTheServersReason() throws Exception {
        MainTest.Result r = MainTest.run("bench-serve", "--url", url, "--requests", "2", "--max-tokens", "2", "--json");
        assertEquals(1, r.code());
        JsonNode report = JSON.readTree(r.out());
        assertEquals(0, report.get("completed").intValue());
        assertEquals(1, report.get("errors").intValue());
        String reason = report.get("first_error").textValue();
        assertTrue(
                reason.startsWith(
                        "the warm-up request failed, nothing was measured: HTTP 401 from " + url + "/v1/completions: "),
                reason);
        assertEquals(List.of("glimmer bench-serve: " + reason), lastLines(r.err(), 1));
        assertTrue(
                report.get("output_tok_s").isNull()
                        && report.get("ttft_ms").get("p50").isNull(),
                r.out());
        assertTrue(
                report.get("prompt_tokens").isNull()
                        && !report.get("usage_reported").booleanValue(),
                r.out());
    }

    /**
     * A server with one slot and one queue place refuses what is beyond them with 503: those requests are
     * counted as errors, and the others are measured as usual.
     */
    @Test
    void aBusyServersRefusalsAreCountedAndTheRunGoesOn() throws Exception {
        try (GlimmerApp busy = TestServer.start(Map.of("inference.parallel", "1", "inference.queue", "1"))) {
            String busyUrl = "http://127.0.0.1:" + busy.port();
            MainTest.Result r = MainTest.run(
                    "bench-serve",
                    "--url",
                    busyUrl,
                    "--concurrency",
                    "4",
                    "--requests",
                    "8",
                    "--prompt-tokens",
                    "16",
                    "--max-tokens",
                    "300",
                    "--json");
            assertEquals(1, r.code(), r.err());
            JsonNode report = JSON.readTree(r.out());
            int completed = report.get("completed").intValue();
            int errors = report.get("errors").intValue();
            assertEquals(8, completed + errors, r.out());
            assertTrue(completed >= 1 && errors >= 1, "one slot and one queue place for 4 clients: " + r.out());
            assertEquals(completed * 300, report.get("output_tokens").intValue(), "the completed requests' tokens");
            String reason = report.get("first_error").textValue();
            assertTrue(reason.startsWith("HTTP 503 from " + busyUrl + "/v1/completions: the server is busy"), reason);
            assertEquals(
                    List.of(
                            "bench-serve: 8 of 8 requests ended, " + errors + " failed",
                            "glimmer bench-serve: " + errors + " of 8 requests failed; the first: " + reason),
                    lastLines(r.err(), 2));
        }
    }

    @Test
    void aServerThatIsDownFailsQuicklyWithOneLine() throws Exception {
        int port;
        try (ServerSocket socket = new ServerSocket(0)) {
            port = socket.getLocalPort();
        }
        MainTest.Result r = assertTimeoutPreemptively(
                HANG_GUARD,
                () -> MainTest.run(
                        "bench-serve",
                        "--url",
                        "http://127.0.0.1:" + port,
                        "--concurrency",
                        "4",
                        "--requests",
                        "8",
                        "--json"));
        assertEquals(1, r.code());
        JsonNode report = JSON.readTree(r.out());
        assertEquals(1, report.get("errors").intValue());
        assertEquals("default", report.get("model").textValue(), "no /v1/models to ask");
        String reason = "the warm-up request failed, nothing was measured: cannot connect to 127.0.0.1:" + port
                + ": connection refused";
        assertEquals(reason, report.get("first_error").textValue());
        assertEquals(List.of("glimmer bench-serve: " + reason), lastLines(r.err(), 1));
        assertTrue(r.err().lines().noneMatch(l -> l.contains("Exception") || l.startsWith("\tat ")), r.err());
    }

    /** A server that takes the connection and never answers: the request ends after --timeout. */
    @Test
    void aSilentServerEndsEachRequestAfterTheTimeout() throws Exception {
        try (ScriptedServer server = new ScriptedServer(null)) {
            MainTest.Result r = assertTimeoutPreemptively(
                    HANG_GUARD,
                    () -> MainTest.run(
                            "bench-serve", "--url", server.url(), "--model", "m", "--timeout", "1", "--json"));
            assertEquals(1, r.code());
            assertEquals(
                    "the warm-up request failed, nothing was measured: the server sent nothing for 1 s (--timeout)",
                    JSON.readTree(r.out()).get("first_error").textValue());
        }
    }

    /** A server that starts its event stream and then stalls: the read ends after --timeout too. */
    @Test
    void aStreamThatStallsEndsAfterTheTimeout() throws Exception {
        String start = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
        String event = "data: {\"choices\":[{\"text\":\"Hi\",\"index\":0}]}\n\n";
        String chunk = Integer.toHexString(event.length()) + "\r\n" + event + "\r\n";
        try (ScriptedServer server = new ScriptedServer(start + chunk)) {
            MainTest.Result r = assertTimeoutPreemptively(
                    HANG_GUARD,
                    () -> MainTest.run(
                            "bench-serve", "--url", server.url(), "--model", "m", "--timeout", "1", "--json"));
            assertEquals(1, r.code());
            assertEquals(
                    "the warm-up request failed, nothing was measured: the server sent nothing for 1 s (--timeout)",
                    JSON.readTree(r.out()).get("first_error").textValue());
            assertTrue(
                    server.requests().getFirst().contains("\"ignore_eos\":true"),
                    server.requests().getFirst());
        }
    }

    /**
     * A server that sends no data: [DONE] (as some llama.cpp forks) but ends its body after the finish_reason,
     * with the usage in that last event: its requests complete and its own token counts are used.
     */
    @Test
    void aStreamThatEndsAfterItsFinishReasonCompletes() throws Exception {
        String events = "data: {\"choices\":[{\"text\":\"Once\",\"index\":0,\"finish_reason\":null}]}\n\n"
                + "data: {\"choices\":[{\"text\":\" upon\",\"index\":0,\"finish_reason\":null}]}\n\n"
                + "data: {\"choices\":[{\"text\":\"\",\"index\":0,\"finish_reason\":\"length\"}],"
                + "\"usage\":{\"completion_tokens\":2,\"prompt_tokens\":21,\"total_tokens\":23}}\n\n";
        String answer = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                + Integer.toHexString(events.length()) + "\r\n" + events + "\r\n0\r\n\r\n";
        try (ScriptedServer server = new ScriptedServer(answer)) {
            MainTest.Result r = assertTimeoutPreemptively(
                    HANG_GUARD,
                    () -> MainTest.run(
                            "bench-serve",
                            "--url",
                            server.url(),
                            "--model",
                            "m",
                            "--requests",
                            "3",
                            "--prompt-tokens",
                            "20",
                            "--max-tokens",
                            "2",
                            "--timeout",
                            "5",
                            "--json"));
            assertEquals(0, r.code(), r.err());
            JsonNode report = JSON.readTree(r.out());
            assertEquals(3, report.get("completed").intValue(), r.out());
            assertEquals(3 * 21, report.get("prompt_tokens").intValue());
            assertEquals(3 * 2, report.get("output_tokens").intValue());
            assertEquals(21, report.get("warmup").get("prompt_tokens").intValue());
            assertTrue(report.get("itl_ms").get("p50").doubleValue() >= 0, r.out());
            assertEquals(4, server.requests().size(), "the warm-up and 3 measured requests");
            JsonNode request = JSON.readTree(server.requests().getLast());
            assertEquals("m", request.get("model").textValue());
            assertEquals(2, request.get("max_tokens").intValue());
            assertEquals(0, request.get("temperature").intValue());
            assertTrue(request.get("stream").booleanValue()
                    && request.get("ignore_eos").booleanValue());
            assertTrue(request.get("stream_options").get("include_usage").booleanValue());
            assertTrue(request.get("prompt").textValue().endsWith("."), request.toString());
        }
    }

    /** Prompts that start with the same text: the server copies the prefix into the later ones instead of computing it. */
    @Test
    void promptsWithASharedPrefixAreServedFromItsCache() throws Exception {
        double savedBefore = metric("glimmer_prefix_tokens_saved_total");
        MainTest.Result r = MainTest.run(
                "bench-serve",
                "--url",
                url,
                "--api-key",
                KEY,
                "--concurrency",
                "2",
                "--requests",
                "6",
                "--prompt-tokens",
                "96",
                "--shared-prefix",
                "64",
                "--max-tokens",
                "4",
                "--json");
        assertEquals(0, r.code(), r.err());
        assertEquals(6, JSON.readTree(r.out()).get("completed").intValue());
        assertTrue(r.err().contains("words the same in every one"), r.err());
        double saved = metric("glimmer_prefix_tokens_saved_total") - savedBefore;
        // the first two run together and compute it; each later one copies about 64 tokens
        assertTrue(saved >= 4 * 40, "prompt tokens copied instead of computed: " + saved);
    }

    @Test
    void badOptionsAreUsageErrors() {
        MainTest.Result r = MainTest.run("bench-serve", "--url", url, "--concurrency", "0");
        assertEquals(2, r.code());
        assertEquals(
                "glimmer bench-serve: --concurrency must be at least 1, got 0",
                r.err().strip());
        r = MainTest.run("bench-serve", "--url", "localhost:8080");
        assertEquals(2, r.code());
        assertEquals(
                "glimmer bench-serve: --url must look like http://host:port, got 'localhost:8080'",
                r.err().strip());
        r = MainTest.run("bench-serve", "--url", url, "--api-key", "two words");
        assertEquals(2, r.code());
        assertEquals(
                "glimmer bench-serve: --api-key must be printable ASCII without spaces (it is sent in an HTTP header)",
                r.err().strip());
        r = MainTest.run("bench-serve", "--url", url, "--prompt-tokens", "48", "--shared-prefix", "48");
        assertEquals(2, r.code());
        assertEquals(
                "glimmer bench-serve: --shared-prefix must be at least 0 and less than --prompt-tokens (48), got 48",
                r.err().strip());
        r = MainTest.run("bench-serve", "--concurrency", "2");
        assertEquals(2, r.code());
        assertTrue(r.err().contains("bench-serve needs --url U"), r.err());
    }

    /** The sum of every sample of a metric in the server's /metrics text. */
    static double metric(String name) throws Exception {
        try (HttpClient client = HttpClient.newHttpClient()) {
            String text = client.send(
                            HttpRequest.newBuilder(URI.create(url + "/metrics"))
                                    .header("Authorization", "Bearer " + KEY)
                                    .build(),
                            HttpResponse.BodyHandlers.ofString())
                    .body();
            double sum = 0;
            boolean found = false;
            for (String line : text.lines().toList()) {
                if (line.startsWith(name + " ") || line.startsWith(name + "{")) {
                    sum += Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
                    found = true;
                }
            }
            assertTrue(found, name + " not in /metrics");
            return sum;
        }
    }

    static List<String> lastLines(String text, int n) {
        List<String> lines = text.strip().lines().toList();
        return lines.subList(Math.max(0, lines.size() - n), lines.size());
    }

    /**
     * A socket server that reads each request, writes {@code answer} (null: nothing) and then holds the
     * connection open without another byte, as a server stuck in a long step would (unless the answer
     * ended its body).
     */
    static final class ScriptedServer implements AutoCloseable {
        private final ServerSocket socket = new ServerSocket(0);
        private final List<Socket> held = new ArrayList<>();
        private final List<String> requests = new ArrayList<>();
        private final Thread acceptor;

        ScriptedServer(String answer) throws IOException {
            acceptor = Thread.ofVirtual().start(() -> {
                try {
                    while (true) {
                        Socket client = socket.accept();
                        synchronized (this) {
                            held.add(client);
                        }
                        Thread.ofVirtual().start(() -> serve(client, answer));
                    }
                } catch (IOException closed) {
                    // close() ends the acceptor.
                }
            });
        }

        /** Answers each request of the connection (clients keep it alive for the next one) until it closes. */
        private void serve(Socket client, String answer) {
            try {
                InputStream in = client.getInputStream();
                for (String head = readHead(in); !head.isEmpty(); head = readHead(in)) {
                    int length = 0;
                    for (String line : head.split("\r\n")) {
                        if (line.toLowerCase(java.util.Locale.ROOT).startsWith("content-length:")) {
                            length = Integer.parseInt(line.substring(15).strip());
                        }
                    }
                    String body = new String(in.readNBytes(length), StandardCharsets.UTF_8);
                    synchronized (this) {
                        requests.add(body);
                    }
                    if (answer != null) {
                        OutputStream out = client.getOutputStream();
                        out.write(answer.getBytes(StandardCharsets.UTF_8));
                        out.flush();
                    }
                }
            } catch (IOException gone) {
                // The client gave up: what the test expects.
            }
        }

        private static String readHead(InputStream in) throws IOException {
            StringBuilder head = new StringBuilder();
            int b;
            while ((b = in.read()) >= 0) {
                head.append((char) b);
                if (head.length() >= 4 && head.substring(head.length() - 4).equals("\r\n\r\n")) {
                    break;
                }
            }
            return head.toString();
        }

        String url() {
            return "http://127.0.0.1:" + socket.getLocalPort();
        }

        synchronized List<String> requests() {
            return List.copyOf(requests);
        }

        @Override
        public void close() throws Exception {
            socket.close();
            acceptor.join();
            synchronized (this) {
                for (Socket s : held) {
                    s.close();
                }
            }
        }
    }
}
