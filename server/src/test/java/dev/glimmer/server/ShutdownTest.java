package dev.glimmer.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/** Stopping the server (what Ctrl-C does) ends running streams properly: a final chunk, then [DONE]. */
class ShutdownTest {

    @Test
    void runningStreamsGetAFinalChunk() throws Exception {
        GlimmerApp app = TestServer.start(Map.of("model.ctx", "4096"));
        String endless =
                "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 4000, \"stream\": true,"
                        + " \"temperature\": 0, \"logit_bias\": {\"960\": -100, \"967\": -100, \"969\": -100}}";
        try (HttpClient http = HttpClient.newHttpClient()) {
            HttpRequest request = HttpRequest.newBuilder(
                            URI.create("http://127.0.0.1:" + app.port() + "/v1/chat/completions"))
                    .header("Content-Type", "application/json")
                    .POST(HttpRequest.BodyPublishers.ofString(endless))
                    .build();
            HttpResponse<java.io.InputStream> response = http.send(request, HttpResponse.BodyHandlers.ofInputStream());
            assertEquals(200, response.statusCode());
            BufferedReader in = new BufferedReader(new InputStreamReader(response.body(), StandardCharsets.UTF_8));
            StringBuilder body = new StringBuilder();
            int frames = 0;
            while (frames < 3) {
                String line = in.readLine();
                body.append(line).append('\n');
                if (line.startsWith("data: ")) {
                    frames++;
                }
            }
            CompletableFuture<Void> stopping = CompletableFuture.runAsync(app::close);
            String line;
            while ((line = in.readLine()) != null) {
                body.append(line).append('\n');
            }
            stopping.get();
            List<JsonNode> events = Sse.events(body.toString());
            JsonNode last = events.getLast();
            assertEquals("stop", last.at("/choices/0/finish_reason").asText());
            assertTrue(events.size() < 4000, "the generation was ended early");
        }
    }
}
