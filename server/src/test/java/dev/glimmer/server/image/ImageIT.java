package dev.glimmer.server.image;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.glimmer.server.TestServer;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The container image Maven built (target/glimmer-image.tar, profile "image" of server/pom.xml), checked without a
 * container runtime: its configuration (non-root user, entrypoint, GLIMMER_* environment, port, model volume), then
 * its layers unpacked into a directory and its entrypoint run there under chroot as the image's user, with the
 * tiny model where the image expects a model to be mounted: it must serve (only the image's own runtime and
 * libraries are there to run it) and stop on SIGTERM.
 */
class ImageIT {
    static final Path TAR = Path.of("target", "glimmer-image.tar");
    static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void theImageRunsAsItsUserWithItsOwnRuntimeAndServes(@TempDir Path dir) throws Exception {
        assumeTrue(
                ((Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid")) == 0,
                "unpacking the image and running it under chroot needs root (CI's ./glimmer test runs as root)");
        assertTrue(Files.isRegularFile(TAR), TAR + " was not built");
        Path unpacked = Files.createDirectory(dir.resolve("tar"));
        run(List.of("tar", "-xf", TAR.toString(), "-C", unpacked.toString()));
        JsonNode manifest =
                JSON.readTree(unpacked.resolve("manifest.json").toFile()).get(0);
        assertTrue(manifest.get("RepoTags").toString().contains("glimmer:latest"), manifest.toString());
        JsonNode config = JSON.readTree(
                        unpacked.resolve(manifest.get("Config").asText()).toFile())
                .get("config");

        assertEquals("65532:65532", config.get("User").asText(), "the image runs as a non-root user");
        assertTrue(config.at("/ExposedPorts").has("8080/tcp"), config.toString());
        assertTrue(config.at("/Volumes").has("/models"), config.toString());
        Map<String, String> env = new java.util.LinkedHashMap<>();
        for (JsonNode e : config.get("Env")) {
            String[] kv = e.asText().split("=", 2);
            env.put(kv[0], kv[1]);
        }
        assertEquals("0.0.0.0", env.get("GLIMMER_SERVER_HOST"));
        String modelPath = env.get("GLIMMER_MODEL_PATH");

        Path root = Files.createDirectory(dir.resolve("root"));
        for (JsonNode layer : manifest.get("Layers")) {
            run(List.of("tar", "-xzf", unpacked.resolve(layer.asText()).toString(), "-C", root.toString()));
        }
        // The model is mounted at run time; here it is copied where the image's GLIMMER_MODEL_PATH says.
        Files.copy(TestServer.tinyModel(), root.resolve(modelPath.substring(1)));

        int port;
        try (ServerSocket probe = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
            port = probe.getLocalPort();
        }
        env.put("GLIMMER_SERVER_PORT", Integer.toString(port));
        env.put("GLIMMER_MODEL_BACKEND", "cpu");
        // As a container runtime would: /proc mounted in the root (the runtime finds its libraries through
        // /proc/self/exe), in a mount namespace of its own, then chroot as the image's user. Each step execs the
        // next, so the server keeps this process's id and gets the SIGTERM below.
        List<String> command = new ArrayList<>(List.of(
                "unshare",
                "--mount",
                "sh",
                "-c",
                "mount -t proc proc \"$0/proc\" && user=\"$1\" && shift && exec chroot --userspec=\"$user\" \"$0\" \"$@\"",
                root.toString(),
                config.get("User").asText()));
        config.get("Entrypoint").forEach(a -> command.add(a.asText()));
        config.get("Cmd").forEach(a -> command.add(a.asText()));
        assertEquals("serve", command.getLast());
        ProcessBuilder builder = new ProcessBuilder(command)
                .redirectErrorStream(true)
                .redirectOutput(dir.resolve("server.log").toFile());
        builder.environment().clear();
        builder.environment().putAll(env);
        Process server = builder.start();
        try (HttpClient http = HttpClient.newHttpClient()) {
            String base = "http://127.0.0.1:" + port;
            awaitReady(http, base, server, dir.resolve("server.log"));
            HttpResponse<String> reply = http.send(
                    HttpRequest.newBuilder(URI.create(base + "/v1/completions"))
                            .header("Content-Type", "application/json")
                            .POST(HttpRequest.BodyPublishers.ofString(
                                    "{\"prompt\": \"Once upon a time\", \"max_tokens\": 4}"))
                            .build(),
                    HttpResponse.BodyHandlers.ofString());
            assertEquals(200, reply.statusCode(), reply.body());
            assertEquals(
                    4,
                    JSON.readTree(reply.body()).at("/usage/completion_tokens").asInt(),
                    reply.body());
            server.destroy(); // SIGTERM: nothing runs, so the drain ends at once
            assertTrue(server.waitFor(30, TimeUnit.SECONDS), log(dir.resolve("server.log")));
            assertEquals(0, server.exitValue(), log(dir.resolve("server.log")));
        } finally {
            server.destroyForcibly().waitFor();
        }
    }

    private static void awaitReady(HttpClient http, String base, Process server, Path log) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (System.nanoTime() < deadline) {
            assertTrue(server.isAlive(), "the image's server ended:\n" + log(log));
            try {
                if (http.send(
                                        HttpRequest.newBuilder(URI.create(base + "/ready"))
                                                .build(),
                                        HttpResponse.BodyHandlers.discarding())
                                .statusCode()
                        == 200) {
                    return;
                }
            } catch (IOException notListeningYet) {
                // starting
            }
            Thread.sleep(100);
        }
        throw new AssertionError("the image's server never got ready:\n" + log(log));
    }

    private static String log(Path log) throws IOException {
        return Files.readString(log, StandardCharsets.UTF_8);
    }

    private static void run(List<String> command) throws Exception {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, p.waitFor(), String.join(" ", command) + ":\n" + out);
    }
}
