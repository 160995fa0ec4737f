package dev.glimmer.server;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.restassured.path.json.JsonPath;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Two conversations with one long system prompt (sub-agents of one agent): the second, sent while the first is still
 * generating, gets the shared prefix copied from the first's cache instead of computing it, and says so in
 * {@code cached_tokens} and on {@code /metrics}.
 */
class PrefixSharingTest {
    static GlimmerApp app;

    @BeforeAll
    static void start() {
        app = TestServer.start(Map.of("model.ctx", "2048", "inference.prompt-chunk", "128", "inference.parallel", "2"));
    }

    @AfterAll
    static void stop() {
        app.close();
    }

    /** The tokens of {@code text} by the server on {@code port} ({@code POST /tokenize}). */
    static List<Integer> tokenize(int port, String text) {
        return given().port(port)
                .contentType("application/json")
                .body(Map.of("content", text))
                .post("/tokenize")
                .then()
                .statusCode(200)
                .extract()
                .jsonPath()
                .getList("tokens", Integer.class);
    }

    @Test
    void aSecondConversationCopiesTheSharedPrefixOfARunningOne() throws Exception {
        List<Integer> system = new ArrayList<>();
        while (system.size() < 600) {
            system.addAll(
                    tokenize(app.port(), "You are a careful coding agent. Read the files before you change them. "));
        }
        List<Integer> first = new ArrayList<>(system);
        first.addAll(tokenize(app.port(), "<|user|>Fix the parser.<|assistant|>"));
        List<Integer> second = new ArrayList<>(system);
        second.addAll(tokenize(app.port(), "<|user|>Write the docs.<|assistant|>"));
        int shared = 0;
        while (first.get(shared).equals(second.get(shared))) {
            shared++;
        }

        String running = new ObjectMapper()
                .writeValueAsString(Map.of(
                        "prompt", first, "max_tokens", 1500, "temperature", 0, "ignore_eos", true, "stream", true));
        try (Socket socket = new Socket("127.0.0.1", app.port())) {
            byte[] bytes = running.getBytes(StandardCharsets.UTF_8);
            OutputStream out = socket.getOutputStream();
            out.write(("POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                            + "Content-Length: " + bytes.length + "\r\n\r\n")
                    .getBytes(StandardCharsets.US_ASCII));
            out.write(bytes);
            out.flush();
            BufferedReader in =
                    new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null && !line.startsWith("data: ")) {
                // the first token comes once the whole prompt is in the cache
            }
            JsonPath r = given().port(app.port())
                    .contentType("application/json")
                    .body(Map.of("prompt", second, "max_tokens", 4, "temperature", 0))
                    .post("/v1/completions")
                    .then()
                    .statusCode(200)
                    .extract()
                    .jsonPath();
            assertEquals(shared, r.getInt("usage.prompt_tokens_details.cached_tokens"));
            assertEquals(second.size() - shared, r.getInt("timings.prompt_n"));
        }
        String metrics = given().port(app.port())
                .get("/metrics")
                .then()
                .statusCode(200)
                .extract()
                .asString();
        assertTrue(metrics.contains("glimmer_prefix_hits_total{source=\"conversation\"} 1.0"), metrics);
        assertTrue(
                metrics.contains("glimmer_prefix_tokens_saved_total{source=\"conversation\"} " + shared + ".0"),
                metrics);
    }
}
