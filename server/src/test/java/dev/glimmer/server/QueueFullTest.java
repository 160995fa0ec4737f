package dev.glimmer.server;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.containsString;
import static org.hamcrest.Matchers.equalTo;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/** With every slot and queue place taken, a request is refused at once with 503 and Retry-After. */
class QueueFullTest {
    static final String ENDLESS = "{\"prompt\": \"Once upon a time\", \"max_tokens\": 4000, \"stream\": true,"
            + " \"logit_bias\": {\"960\": -100, \"967\": -100, \"969\": -100}}";

    @Test
    void aFullQueueAnswers503WithRetryAfter() throws Exception {
        try (GlimmerApp app = TestServer.start(
                        Map.of("inference.parallel", "1", "inference.queue", "1", "model.ctx", "4096"));
                Socket running = new Socket("127.0.0.1", app.port())) {
            given().port(app.port()).get("/health").then().statusCode(200); // the HTTP client is warm
            // One running (its first token has arrived) ...
            OutputStream out = running.getOutputStream();
            byte[] body = ENDLESS.getBytes(StandardCharsets.UTF_8);
            out.write(("POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                            + "Content-Length: " + body.length + "\r\n\r\n")
                    .getBytes(StandardCharsets.US_ASCII));
            out.write(body);
            BufferedReader in =
                    new BufferedReader(new InputStreamReader(running.getInputStream(), StandardCharsets.UTF_8));
            while (!in.readLine().startsWith("data: ")) {
                // headers, then the first token
            }
            // ... and one waiting for the slot.
            CompletableFuture<Integer> waiting = CompletableFuture.supplyAsync(() -> given().port(app.port())
                    .contentType("application/json")
                    .body("{\"prompt\": \"Hi\", \"max_tokens\": 3}")
                    .post("/v1/completions")
                    .statusCode());
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (app.host().require().scheduler().admitted() < 2 && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            given().port(app.port())
                    .contentType("application/json")
                    .body("{\"prompt\": \"Hi\", \"max_tokens\": 1}")
                    .post("/v1/completions")
                    .then()
                    .statusCode(503)
                    .header("Retry-After", "2")
                    .body("error.type", equalTo("unavailable_error"))
                    .body("error.message", containsString("the server is busy: 1 requests are running and 1 waiting"));
            // The running client hangs up; the waiting request gets the slot.
            running.close();
            assertEquals(200, waiting.get());
        }
    }
}
