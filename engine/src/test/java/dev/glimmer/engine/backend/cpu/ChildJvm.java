package dev.glimmer.engine.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** A test class's {@code main} run in a JVM of its own: this JVM's runtime and class path, the flags given. */
final class ChildJvm {
    private ChildJvm() {}

    /**
     * Runs {@code main}'s class in a new JVM with {@code flags} and gives back what it printed (stdout and stderr);
     * fails the test when it does not end within {@code limit} or does not exit with 0 (its output the message).
     */
    static String run(Class<?> main, Duration limit, List<String> flags) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.addAll(flags);
        command.addAll(List.of("-cp", System.getProperty("java.class.path"), main.getName()));
        Process child = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out = new String(child.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(child.waitFor(limit.toMillis(), TimeUnit.MILLISECONDS), main.getSimpleName() + "'s JVM did not end");
        assertEquals(0, child.exitValue(), out);
        return out;
    }
}
