package dev.glimmer.server.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.jar.Attributes;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;
import java.util.stream.Collectors;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The real {@code ./glimmer} script, run as a user runs it. It runs in a copy of the checkout's layout in a
 * temporary directory whose {@code server/target/glimmer-server.jar} holds this test's class path (the jar is
 * not built yet when the tests run, and the launcher must not start a build inside the build); where the script
 * would call Maven, a recording {@code mvn} on the PATH stands in, so the test sees the arguments it gets.
 */
class LauncherTest {
    private static final long DEADLINE_SECONDS = 120;

    /** The repository's launcher (the tests run in server/). */
    private static final Path SCRIPT = Path.of("..", "glimmer").toAbsolutePath().normalize();

    @TempDir
    static Path checkout;

    record Exit(int code, String out, String err) {}

    @BeforeAll
    static void layOutABuiltCheckout() throws IOException {
        copyScript(checkout);
        Path target = Files.createDirectories(checkout.resolve("server/target/lib"));
        // A jar of nothing but a class path: this test's, as relative URLs (directories end with /).
        Manifest manifest = new Manifest();
        manifest.getMainAttributes().put(Attributes.Name.MANIFEST_VERSION, "1.0");
        Path jarDir = target.getParent();
        String classPath = java.util.Arrays.stream(
                        System.getProperty("java.class.path").split(File.pathSeparator))
                .map(entry -> Path.of(entry).toAbsolutePath())
                .map(entry -> jarDir.relativize(entry).toString().replace(File.separatorChar, '/')
                        + (Files.isDirectory(entry) ? "/" : ""))
                .map(relative -> relative.replace(" ", "%20"))
                .collect(Collectors.joining(" "));
        manifest.getMainAttributes().put(Attributes.Name.CLASS_PATH, classPath);
        try (OutputStream out = Files.newOutputStream(jarDir.resolve("glimmer-server.jar"));
                JarOutputStream jar = new JarOutputStream(out, manifest)) {
            jar.flush();
        }
        // The last build: after every source (there are none in this copy).
        Files.setLastModifiedTime(Files.createFile(jarDir.resolve(".glimmer-built")), FileTime.from(Instant.now()));
    }

    private static void copyScript(Path root) throws IOException {
        Path copy = root.resolve("glimmer");
        Files.copy(SCRIPT, copy);
        Files.setPosixFilePermissions(copy, PosixFilePermissions.fromString("rwxr-xr-x"));
    }

    /**
     * Runs {@code root/glimmer args} with this JVM's JDK; {@code bin}, when given, comes first on the PATH.
     */
    private static Exit glimmer(Path root, Path bin, Map<String, String> env, String... args)
            throws IOException, InterruptedException {
        List<String> command =
                new ArrayList<>(List.of("bash", root.resolve("glimmer").toString()));
        command.addAll(List.of(args));
        ProcessBuilder builder = new ProcessBuilder(command);
        builder.environment().put("JAVA_HOME", System.getProperty("java.home"));
        builder.environment().remove("GLIMMER_DEBUG");
        builder.environment().remove("GLIMMER_JAVA_OPTS");
        if (bin != null) {
            builder.environment().put("PATH", bin + File.pathSeparator + System.getenv("PATH"));
        }
        builder.environment().putAll(env);
        Path out = Files.createTempFile(checkout, "stdout", ".txt");
        Process process = builder.redirectOutput(out.toFile()).start();
        // Read to its end: the launcher's stderr filter may write its last bytes after the JVM has gone, and
        // the pipe ends only when both have closed it.
        CompletableFuture<String> err = CompletableFuture.supplyAsync(() -> {
            try {
                return new String(process.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        });
        boolean ended = process.waitFor(DEADLINE_SECONDS, TimeUnit.SECONDS);
        if (!ended) {
            process.descendants().forEach(ProcessHandle::destroyForcibly);
            process.destroyForcibly().waitFor();
        }
        Exit exit;
        try {
            exit = new Exit(ended ? process.exitValue() : -1, Files.readString(out), err.get(30, TimeUnit.SECONDS));
        } catch (ExecutionException | TimeoutException e) {
            throw new AssertionError("stderr of ./glimmer " + String.join(" ", args) + " did not end", e);
        }
        assertTrue(
                ended, "./glimmer " + String.join(" ", args) + " still runs after " + DEADLINE_SECONDS + " s: " + exit);
        return exit;
    }

    private static Exit glimmer(String... args) throws IOException, InterruptedException {
        return glimmer(checkout, null, Map.of(), args);
    }

    /** A directory with a Maven that records its arguments (and fails when {@code MVN_EXIT} says so). */
    private static Path recordingMaven(Path dir) throws IOException {
        Path bin = Files.createDirectories(dir.resolve("bin"));
        write(
                bin.resolve("mvn"),
                "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"" + dir.resolve("mvn-args") + "\"\n"
                        + "exit \"${MVN_EXIT:-0}\"\n");
        // What `./glimmer test` would otherwise install with apt-get, when this machine lacks it: not used here.
        for (String tool : List.of("clang-19", "chromium", "chromedriver")) {
            if (!onPath(tool)) {
                write(bin.resolve(tool), "#!/bin/sh\nexit 0\n");
            }
        }
        return bin;
    }

    private static boolean onPath(String tool) {
        return java.util.Arrays.stream(System.getenv("PATH").split(File.pathSeparator))
                .anyMatch(dir -> Files.isExecutable(Path.of(dir, tool)));
    }

    private static void write(Path file, String text) throws IOException {
        Files.writeString(file, text, StandardCharsets.UTF_8);
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rwxr-xr-x"));
    }

    /** No "WARNING: Using incubator modules" from the JVM: --help prints the overview and nothing on stderr. */
    @Test
    void helpIsTheOverviewAlone() throws Exception {
        Exit exit = glimmer("--help");
        assertEquals(0, exit.code(), exit.toString());
        assertTrue(exit.out().startsWith("Glimmer: "), exit.out());
        assertEquals("", exit.err());
    }

    /** A one-line error stays one line, and names the flag typed. */
    @Test
    void aBadFlagIsOneLineNamingIt() throws Exception {
        Exit exit = glimmer("serve", "--ctx", "-5");
        assertEquals(2, exit.code(), exit.toString());
        assertEquals("glimmer serve: --ctx must be in [0, 16777216], got -5\n", exit.err());
    }

    @Test
    void versionPrintsTheProjectVersion() throws Exception {
        Exit dashed = glimmer("--version");
        assertEquals(0, dashed.code(), dashed.toString());
        assertTrue(
                dashed.out().matches("glimmer \\d+\\.\\d+\\.\\d+(-SNAPSHOT)?( \\(commit [0-9a-f]{4,}\\))?\n"),
                dashed.out());
        assertEquals("", dashed.err());
        assertEquals(dashed, glimmer("version"));
    }

    /** Without --model the model commands use the demo model, as serve does, and say so on stderr. */
    @Test
    void modelCommandsFallBackToTheDemoModel(@TempDir Path cache) throws Exception {
        Map<String, String> env = Map.of("XDG_CACHE_HOME", cache.toString());
        Path demo = cache.resolve("glimmer/glimmer-demo-tiny-f32-seed42.gguf");
        Exit info = glimmer(checkout, null, env, "info", "--json");
        assertEquals(0, info.code(), info.toString());
        assertEquals(
                "glimmer: no --model given: using the demo model (random weights, so its text is gibberish) " + demo
                        + ", writing it first\n",
                info.err());
        assertTrue(info.out().contains("\"file\" : \"" + demo + "\""), info.out());
        Exit tokens = glimmer(checkout, null, env, "tokenize", "--text", "Hello");
        assertEquals(0, tokens.code(), tokens.toString());
        assertTrue(tokens.out().startsWith("{\"ids\":["), tokens.out());
        assertEquals(
                "glimmer: no --model given: using the demo model (random weights, so its text is gibberish) " + demo
                        + "\n",
                tokens.err());
        Exit generated = glimmer(checkout, null, env, "generate", "--prompt", "Hi", "--max-tokens", "3");
        assertEquals(0, generated.code(), generated.toString());
        assertTrue(generated.err().contains("3 tokens"), generated.err());
    }

    /** The example of `./glimmer test --help` runs one class of one module: Maven gets -am and a lenient -Dtest. */
    @Test
    void theTestHelpsExampleGetsWhatMavenNeeds(@TempDir Path dir) throws Exception {
        Path bin = recordingMaven(dir);
        Exit help = glimmer(checkout, bin, Map.of(), "test", "--help");
        assertEquals(0, help.code(), help.toString());
        String example = help.out()
                .lines()
                .filter(l -> l.startsWith("e.g. ./glimmer test "))
                .findFirst()
                .orElseThrow();
        String[] args = example.substring("e.g. ./glimmer test ".length())
                .split(" \\(")[0]
                .split(" ");
        // The example names a real test class of the module it names.
        assertEquals("-pl", args[0], example);
        String testClass = args[2].substring("-Dtest=".length());
        try (var files = Files.walk(Path.of("..", args[1], "src", "test", "java"))) {
            assertTrue(
                    files.anyMatch(f -> f.getFileName().toString().equals(testClass + ".java")),
                    "no " + testClass + " in " + args[1] + ": " + example);
        }
        List<String> command = new ArrayList<>(List.of("test"));
        command.addAll(List.of(args));
        Exit run = glimmer(checkout, bin, Map.of(), command.toArray(String[]::new));
        assertEquals(0, run.code(), run.toString());
        List<String> maven = Files.readAllLines(dir.resolve("mvn-args"));
        assertEquals(
                List.of(
                        "-B",
                        "verify",
                        "-Dglimmer.commit=",
                        "-pl",
                        "engine",
                        "-Dtest=GgufFileTest",
                        "-am",
                        "-Dsurefire.failIfNoSpecifiedTests=false"),
                maven);
        // The README's longer form gets nothing twice.
        glimmer(
                checkout,
                bin,
                Map.of(),
                "test",
                "-pl",
                "engine",
                "-am",
                "-Dtest=GgufFileTest",
                "-Dsurefire.failIfNoSpecifiedTests=false");
        assertEquals(
                List.of(
                        "-B",
                        "verify",
                        "-Dglimmer.commit=",
                        "-pl",
                        "engine",
                        "-am",
                        "-Dtest=GgufFileTest",
                        "-Dsurefire.failIfNoSpecifiedTests=false"),
                Files.readAllLines(dir.resolve("mvn-args")));
    }

    /** With no build yet, the launcher says it builds for the first time, not that sources changed. */
    @Test
    void theFirstBuildSaysSo(@TempDir Path dir) throws Exception {
        Path fresh = Files.createDirectories(dir.resolve("fresh"));
        copyScript(fresh);
        Path bin = recordingMaven(dir);
        Exit first = glimmer(fresh, bin, Map.of("MVN_EXIT", "1"), "--help");
        assertEquals(1, first.code(), first.toString());
        assertTrue(first.err().startsWith("glimmer: building for the first time"), first.err());
        assertTrue(first.err().contains("the build failed"), first.err());
        assertTrue(Files.readAllLines(dir.resolve("mvn-args")).contains("package"));
    }
}
