package dev.glimmer.server;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * A client of a non-streaming request that hangs up stops its generation, as a streaming one does:
 * once the answer takes longer than a quick one, the response probes the connection with spaces
 * before the JSON body, and the first failed write cancels the job. A client that stays gets a body
 * that parses as usual; a quick answer's body is its JSON alone.
 */
class NonStreamingDisconnectTest {
    static final int MAX_TOKENS = 1000;
    /**
     * How soon a long answer is probed in the tests of one (HeldJsonResponse's {@code glimmer.http.probe-after-ms}):
     * the tiny model answers 1,000 tokens within a second on a quiet machine, sooner than the default 2 s.
     */
    static final String PROBE_AFTER_MS = "glimmer.http.probe-after-ms";

    static GlimmerApp app;

    @BeforeAll
    static void start() {
        app = TestServer.start(Map.of("model.ctx", "1024"));
        completion(4); // warm-up: the first request's code paths compile
    }

    /** A greedy completion of exactly {@code tokens} tokens, its body as sent. */
    static String completion(int tokens) {
        return given().port(app.port())
                .contentType("application/json")
                .body(Map.of("prompt", "Once upon a time", "max_tokens", tokens, "temperature", 0, "ignore_eos", true))
                .post("/v1/completions")
                .then()
                .statusCode(200)
                .contentType("application/json")
                .extract()
                .asString();
    }

    @AfterAll
    static void stop() {
        app.close();
    }

    /** A long generation on each generating route: chat completions, Responses, Anthropic Messages. */
    static List<Arguments> longGenerations() {
        List<Map<String, String>> story = List.of(Map.of("role", "user", "content", "Write a very long story."));
        return List.of(
                Arguments.of(
                        "/v1/chat/completions",
                        Map.of("messages", story, "max_tokens", MAX_TOKENS, "temperature", 0, "stream", false)),
                Arguments.of(
                        "/v1/responses", Map.of("input", story, "max_output_tokens", MAX_TOKENS, "temperature", 0)),
                Arguments.of("/v1/messages", Map.of("messages", story, "max_tokens", MAX_TOKENS, "temperature", 0)));
    }

    @ParameterizedTest
    @MethodSource("longGenerations")
    void aClientThatHangsUpStopsItsGeneration(String path, Map<String, Object> request) throws Exception {
        System.setProperty(PROBE_AFTER_MS, "50");
        try {
            hangUpDuring(path, request);
        } finally {
            System.clearProperty(PROBE_AFTER_MS);
        }
    }

    private static void hangUpDuring(String path, Map<String, Object> request) throws Exception {
        double cancelledBefore = metric("glimmer_requests_cancelled_total");
        double generatedBefore = metric("glimmer_tokens_predicted_total");
        byte[] body = new ObjectMapper().writeValueAsBytes(request);
        try (Socket socket = new Socket("127.0.0.1", app.port())) {
            OutputStream out = socket.getOutputStream();
            out.write(("POST " + path + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                            + "Content-Length: " + body.length + "\r\n\r\n")
                    .getBytes(StandardCharsets.US_ASCII));
            out.write(body);
            out.flush();
            InputStream in = socket.getInputStream();
            // Read the status line and headers, then the first byte of the body: a space, sent while generating.
            StringBuilder head = new StringBuilder();
            while (!head.toString().endsWith("\r\n\r\n")) {
                head.append((char) in.read());
            }
            assertTrue(head.toString().startsWith("HTTP/1.1 200"), head.toString());
            int first = readBodyByte(in, head.toString());
            assertEquals(' ', first, "the held response starts with a space");
        }
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (app.host().require().scheduler().admitted() > 0 && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertEquals(0, app.host().require().scheduler().admitted(), "the slot is freed");
        assertEquals(cancelledBefore + 1, metric("glimmer_requests_cancelled_total"), "counted as cancelled");
        double generated = metric("glimmer_tokens_predicted_total") - generatedBefore;
        assertTrue(generated < MAX_TOKENS, "stopped early: " + generated + " of " + MAX_TOKENS + " tokens");
    }

    /** A quick answer on each generating route starts with its JSON: no probe, so no space. */
    @ParameterizedTest
    @MethodSource("quickGenerations")
    void aQuickAnswerIsItsJsonAlone(String path, Map<String, Object> request) {
        long start = System.nanoTime();
        var r = given().port(app.port())
                .contentType("application/json")
                .body(request)
                .post(path)
                .then()
                .statusCode(200)
                .contentType("application/json")
                .extract();
        long millis = (System.nanoTime() - start) / 1_000_000;
        assertTrue(
                r.asString().startsWith("{"),
                "answered in " + millis + " ms, starting with '" + r.asString().substring(0, 10) + "'");
    }

    static List<Arguments> quickGenerations() {
        List<Map<String, String>> hi = List.of(Map.of("role", "user", "content", "Hi"));
        return List.of(
                Arguments.of(
                        "/v1/completions", Map.of("prompt", "Once upon a time", "max_tokens", 4, "temperature", 0)),
                Arguments.of("/v1/chat/completions", Map.of("messages", hi, "max_tokens", 4, "temperature", 0)),
                Arguments.of("/v1/responses", Map.of("input", hi, "max_output_tokens", 4, "temperature", 0)),
                Arguments.of("/v1/messages", Map.of("messages", hi, "max_tokens", 4, "temperature", 0)));
    }

    /**
     * A client that waits through a long answer gets the spaces, then a body that parses as usual. Long: the
     * answers double until one takes longer than a quick one on this machine (each shorter one is a quick one).
     */
    @Test
    void aClientThatStaysThroughALongAnswerGetsAnOrdinaryJsonBody() throws Exception {
        System.setProperty(PROBE_AFTER_MS, "50");
        try {
            stayThroughALongAnswer();
        } finally {
            System.clearProperty(PROBE_AFTER_MS);
        }
    }

    private static void stayThroughALongAnswer() throws Exception {
        int tokens = 32;
        String body = completion(tokens);
        while (!body.startsWith(" ") && tokens < MAX_TOKENS) {
            assertTrue(body.startsWith("{"), body.substring(0, 10));
            tokens = Math.min(MAX_TOKENS, 2 * tokens);
            body = completion(tokens);
        }
        assertTrue(body.startsWith(" "), "spaces come before the JSON of a long answer (" + tokens + " tokens)");
        var json = new ObjectMapper().readTree(body);
        assertEquals("text_completion", json.path("object").asText());
        assertEquals(tokens, json.path("usage").path("completion_tokens").asInt());
    }

    /** The first byte of a chunked or plain body. */
    private static int readBodyByte(InputStream in, String head) throws Exception {
        if (head.toLowerCase().contains("transfer-encoding: chunked")) {
            StringBuilder size = new StringBuilder();
            while (!size.toString().endsWith("\r\n")) {
                size.append((char) in.read());
            }
        }
        return in.read();
    }

    private static double metric(String name) {
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
