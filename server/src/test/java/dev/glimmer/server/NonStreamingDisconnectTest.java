package dev.glimmer.server;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A client of a non-streaming request that hangs up stops its generation, as a streaming one does:
 * the response holds the connection with spaces before the JSON body, and the first failed write
 * cancels the job. A client that stays gets a body that parses as usual.
 */
class NonStreamingDisconnectTest {
    static final int MAX_TOKENS = 1000;
    static GlimmerApp app;

    @BeforeAll
    static void start() {
        app = TestServer.start(Map.of("model.ctx", "1024"));
    }

    @AfterAll
    static void stop() {
        app.close();
    }

    /** A long generation on each generating route: chat completions, Responses, Anthropic Messages. */
    static List<Arguments> longGenerations() {
        List<Map<String, String>> story = List.of(Map.of("role", "user", "content", "Write a very long story."));
        return List.of(
                Arguments.of("/v1/chat/completions", Map.of("messages", story, "max_tokens", MAX_TOKENS,
                        "temperature", 0, "stream", false)),
                Arguments.of("/v1/responses", Map.of("input", story, "max_output_tokens", MAX_TOKENS,
                        "temperature", 0)),
                Arguments.of("/v1/messages", Map.of("messages", story, "max_tokens", MAX_TOKENS, "temperature", 0)));
    }

    @ParameterizedTest
    @MethodSource("longGenerations")
    void aClientThatHangsUpStopsItsGeneration(String path, Map<String, Object> request) throws Exception {
        double cancelledBefore = metric("glimmer_requests_cancelled_total");
        double generatedBefore = metric("glimmer_tokens_predicted_total");
        byte[] body = new ObjectMapper().writeValueAsBytes(request);
        try (Socket socket = new Socket("127.0.0.1", app.port())) {
            OutputStream out = socket.getOutputStream();
            out.write(("POST " + path + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    + "Content-Length: " + body.length + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
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

    @Test
    void aClientThatStaysGetsAnOrdinaryJsonBody() {
        var r = given().port(app.port()).contentType("application/json")
                .body(Map.of("prompt", "Once upon a time", "max_tokens", 20, "temperature", 0))
                .post("/v1/completions").then().statusCode(200).contentType("application/json").extract();
        assertEquals("text_completion", r.jsonPath().getString("object"));
        assertEquals(20, r.jsonPath().getInt("usage.completion_tokens"));
        assertTrue(r.asString().startsWith(" "), "spaces come before the JSON while generating");
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
        String text = given().port(app.port()).get("/metrics").then().statusCode(200).extract().asString();
        return text.lines().filter(l -> l.startsWith(name + " ")).mapToDouble(l -> Double.parseDouble(l.split(" ")[1]))
                .findFirst().orElseThrow(() -> new AssertionError("no metric " + name));
    }
}
