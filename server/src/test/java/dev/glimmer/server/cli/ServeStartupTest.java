package dev.glimmer.server.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.server.GlimmerApp;
import dev.glimmer.server.TestServer;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
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
 * {@code serve} started as a user starts it, in its own JVM: what it prints and its exit code when it
 * cannot serve, within seconds and before any model is loaded or written.
 */
class ServeStartupTest {
    /** Far more than a JVM start and a failed bind take; a serve that carried on would run forever. */
    private static final long DEADLINE_SECONDS = 60;

    record Exit(int code, String stderr) {
        /**
         * Stderr without the JVM's note on the incubator module, the server's INFO log lines, and SLF4J's
         * notes (slf4j-api comes with the test libraries; the launcher's class path has none).
         */
        List<String> messages() {
            return stderr.lines()
                    .filter(l -> !l.startsWith("WARNING: Using incubator modules")
                            && !l.contains(" INFO ")
                            && !l.startsWith("SLF4J(W)"))
                    .toList();
        }
    }

    /** Runs {@code ./glimmer serve args} in a new JVM with its demo-model cache in {@code cache}. */
    static Exit serve(Path cache, String... args) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--add-modules",
                "jdk.incubator.vector",
                "--enable-native-access=ALL-UNNAMED",
                "-Xmx256m",
                "-cp",
                System.getProperty("java.class.path"),
                Main.class.getName(),
                "serve"));
        command.addAll(List.of(args));
        ProcessBuilder builder = new ProcessBuilder(command).redirectOutput(ProcessBuilder.Redirect.DISCARD);
        builder.environment().put("XDG_CACHE_HOME", cache.toString());
        builder.environment().remove("GLIMMER_DEBUG");
        Process process = builder.start();
        boolean ended = process.waitFor(DEADLINE_SECONDS, TimeUnit.SECONDS);
        if (!ended) {
            process.destroyForcibly().waitFor();
        }
        String stderr = new String(process.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(
                ended, "serve " + String.join(" ", args) + " still runs after " + DEADLINE_SECONDS + " s:\n" + stderr);
        return new Exit(process.exitValue(), stderr);
    }

    /** A port another server holds: one line saying so, exit 2, and no model loaded (the demo model is not even written). */
    @Test
    void aTakenPortIsOneLineAndExit2BeforeAnyModelLoads(@TempDir Path cache) throws Exception {
        try (ServerSocket taken = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
            int port = taken.getLocalPort();
            Exit exit = serve(cache, "--port", Integer.toString(port));
            assertEquals(2, exit.code(), exit.stderr());
            assertEquals(
                    List.of("glimmer serve: cannot listen on 127.0.0.1:" + port
                            + ": the port is already in use (another server?); choose another with --port"),
                    exit.messages(),
                    exit.stderr());
            assertFalse(exit.stderr().contains("Exception"), exit.stderr());
            assertFalse(exit.stderr().contains("loading"), exit.stderr());
            assertFalse(Files.exists(cache.resolve("glimmer")), "the demo model was written");
        }
    }

    /** A file that is no model: the one-line reason, exit 2, and no SEVERE log line before it. */
    @Test
    void aFileThatIsNoModelIsOneLineWithoutALoggedError(@TempDir Path dir) throws Exception {
        Path notAModel = Files.writeString(dir.resolve("notes.gguf"), "not a gguf file");
        Exit exit = serve(dir, "--model", notAModel.toString(), "--port", "0");
        assertEquals(2, exit.code(), exit.stderr());
        assertEquals(1, exit.messages().size(), exit.stderr());
        assertTrue(exit.messages().getFirst().startsWith("glimmer serve: cannot serve the model: "), exit.stderr());
        assertFalse(exit.stderr().contains("SEVERE"), exit.stderr());
    }

    @Test
    void aDirectoryIsNotAModelFile(@TempDir Path dir) throws Exception {
        Exit exit = serve(dir, "--model", dir.toString(), "--port", "0");
        assertEquals(2, exit.code(), exit.stderr());
        assertEquals(List.of("glimmer serve: " + dir + " is a directory; --model takes a GGUF file"), exit.messages());
    }

    /** The real model serves on the port asked for once it is free (the check does not keep it). */
    @Test
    void aFreePortIsServed() throws Exception {
        int port;
        try (ServerSocket probe = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
            port = probe.getLocalPort();
        }
        try (GlimmerApp app =
                GlimmerApp.start(TestServer.config(Map.of("server.port", Integer.toString(port))), Map.of())) {
            assertEquals(port, app.port());
        }
    }
}
