package dev.glimmer.server.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.glimmer.server.Sse;
import dev.glimmer.server.TestServer;
import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code serve} in its own JVM gets SIGTERM (what {@code docker stop} and Kubernetes send) while streams run: from
 * then on new requests get 503 and {@code /ready} 503 while {@code /health} says "draining", every running stream
 * still ends as it would have (its full length, its usage, [DONE]), and the process then exits 0 by itself.
 *
 * <p>A third, endless stream keeps the server draining until the checks are made, whatever the machine's speed; its
 * client then hangs up, as a client may.
 */
class DrainOnSigtermTest {
    private static final Pattern LISTENING = Pattern.compile("listening on http://127\\.0\\.0\\.1:(\\d+)");
    private static final int STREAMS = 2;
    private static final int MAX_TOKENS = 300;
    private static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void sigtermFinishesRunningStreamsRefusesNewOnesAndExits(@TempDir Path cache) throws Exception {
        List<String> command = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--add-modules",
                "jdk.incubator.vector",
                "--enable-native-access=ALL-UNNAMED",
                "-Xmx512m",
                "-cp",
                System.getProperty("java.class.path"),
                Main.class.getName(),
                "serve",
                "--model",
                TestServer.tinyModel().toString(),
                "--port",
                "0",
                "--ctx",
                "4096",
                "--parallel",
                Integer.toString(STREAMS + 1),
                "--backend",
                "cpu",
                "--drain-seconds",
                "120"));
        ProcessBuilder builder = new ProcessBuilder(command).redirectOutput(ProcessBuilder.Redirect.DISCARD);
        builder.environment().put("XDG_CACHE_HOME", cache.toString());
        Process server = builder.start();
        LinkedBlockingQueue<String> log = new LinkedBlockingQueue<>();
        StringBuilder stderr = new StringBuilder();
        Thread.ofPlatform().daemon().start(() -> readLines(server.getErrorStream(), log, stderr));
        try (HttpClient http = HttpClient.newHttpClient()) {
            int port = port(log, stderr);
            String base = "http://127.0.0.1:" + port;
            awaitStatus(http, base + "/ready", 200);

            String story = "{\"messages\": [{\"role\": \"user\", \"content\": \"Tell me a story about a fox.\"}],"
                    + " \"temperature\": 0, \"max_tokens\": " + MAX_TOKENS + ", \"stream\": true,"
                    + " \"stream_options\": {\"include_usage\": true},"
                    + " \"logit_bias\": {\"960\": -100, \"967\": -100, \"969\": -100}}";
            String endless = story.replace("\"max_tokens\": " + MAX_TOKENS, "\"max_tokens\": 3500");
            HttpResponse<InputStream> sentinel =
                    http.send(chat(base, endless), HttpResponse.BodyHandlers.ofInputStream());
            assertEquals(200, sentinel.statusCode());
            sentinel.body().read(new byte[64]);
            List<BufferedReader> streams = new ArrayList<>();
            List<StringBuilder> bodies = new ArrayList<>();
            for (int i = 0; i < STREAMS; i++) {
                HttpResponse<InputStream> r = http.send(chat(base, story), HttpResponse.BodyHandlers.ofInputStream());
                assertEquals(200, r.statusCode());
                streams.add(new BufferedReader(new InputStreamReader(r.body(), StandardCharsets.UTF_8)));
                bodies.add(new StringBuilder());
            }
            // Both streams are generating before the signal.
            for (int i = 0; i < STREAMS; i++) {
                for (int frames = 0; frames < 3; ) {
                    String line = streams.get(i).readLine();
                    bodies.get(i).append(line).append('\n');
                    frames += line.startsWith("data: ") ? 1 : 0;
                }
            }
            server.destroy(); // SIGTERM

            awaitStatus(http, base + "/ready", 503);
            HttpResponse<String> refused = http.send(chat(base, story), HttpResponse.BodyHandlers.ofString());
            assertEquals(503, refused.statusCode(), refused.body());
            assertTrue(
                    refused.headers().firstValue("Retry-After").isPresent(),
                    refused.headers().toString());
            assertTrue(
                    JSON.readTree(refused.body()).at("/error/message").asText().contains("shutting down"),
                    refused.body());
            HttpResponse<String> health = http.send(
                    HttpRequest.newBuilder(URI.create(base + "/health")).build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, health.statusCode());
            assertEquals("draining", JSON.readTree(health.body()).at("/status").asText());
            assertTrue(server.isAlive(), "the server must wait for its running streams");
            sentinel.body().close();

            List<CompletableFuture<String>> rest = new ArrayList<>();
            for (int i = 0; i < STREAMS; i++) {
                BufferedReader in = streams.get(i);
                StringBuilder body = bodies.get(i);
                rest.add(CompletableFuture.supplyAsync(() -> readRest(in, body)));
            }
            for (CompletableFuture<String> body : rest) {
                List<JsonNode> events = Sse.events(body.get(60, TimeUnit.SECONDS));
                JsonNode usage = events.getLast().at("/usage");
                assertEquals(MAX_TOKENS, usage.at("/completion_tokens").asInt(), "the stream was cut: " + usage);
                assertEquals(
                        "length",
                        events.get(events.size() - 2)
                                .at("/choices/0/finish_reason")
                                .asText());
            }
            assertTrue(server.waitFor(30, TimeUnit.SECONDS), "the server did not exit after draining:\n" + stderr);
            assertEquals(0, server.exitValue(), stderr.toString());
        } finally {
            server.destroyForcibly().waitFor();
        }
    }

    private static HttpRequest chat(String base, String body) {
        return HttpRequest.newBuilder(URI.create(base + "/v1/chat/completions"))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(body))
                .build();
    }

    private static void awaitStatus(HttpClient http, String url, int status) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        int last = -1;
        while (System.nanoTime() < deadline) {
            last = http.send(HttpRequest.newBuilder(URI.create(url)).build(), HttpResponse.BodyHandlers.discarding())
                    .statusCode();
            if (last == status) {
                return;
            }
            Thread.sleep(10);
        }
        throw new AssertionError(url + " answered " + last + ", not " + status);
    }

    private static int port(LinkedBlockingQueue<String> log, StringBuilder stderr) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (System.nanoTime() < deadline) {
            String line = log.poll(100, TimeUnit.MILLISECONDS);
            if (line != null) {
                Matcher m = LISTENING.matcher(line);
                if (m.find()) {
                    return Integer.parseInt(m.group(1));
                }
            }
        }
        throw new AssertionError("serve never said where it listens:\n" + stderr);
    }

    private static void readLines(InputStream in, LinkedBlockingQueue<String> lines, StringBuilder all) {
        try (BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = r.readLine()) != null) {
                lines.add(line);
                synchronized (all) {
                    all.append(line).append('\n');
                }
            }
        } catch (Exception e) {
            // The process ended.
        }
    }

    private static String readRest(BufferedReader in, StringBuilder body) {
        try {
            String line;
            while ((line = in.readLine()) != null) {
                body.append(line).append('\n');
            }
            return body.toString();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }
}
