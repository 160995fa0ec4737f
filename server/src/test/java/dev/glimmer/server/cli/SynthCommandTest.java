package dev.glimmer.server.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SynthCommandTest {

    @TempDir
    Path dir;

    private static JsonNode infoJson(Path model) throws Exception {
        MainTest.Result r = MainTest.run("info", "--model", model.toString(), "--json");
        assertEquals(0, r.code(), r.err());
        return new ObjectMapper().readTree(r.out());
    }

    @Test
    void tinyQ4_0DescribesLikeTheOracleTinyQ4_0() throws Exception {
        Path out = dir.resolve("tiny-q4_0.gguf");
        MainTest.Result r =
                MainTest.run("synth", "--preset", "tiny", "--wtype", "q4_0", "--seed", "7", "-o", out.toString());
        assertEquals(0, r.code(), r.err());
        assertTrue(r.err().contains("wrote " + out), r.err());
        assertTrue(r.err().contains("100.0%"), r.err());
        assertFalse(Files.exists(dir.resolve("tiny-q4_0.gguf.partial")));

        ObjectNode ours = (ObjectNode) infoJson(out);
        ObjectNode oracle = (ObjectNode) infoJson(InfoCommandTest.ORACLE.resolve("tiny-q4_0.gguf"));
        // The file path, size and name differ (the vocabulary's random merges have other lengths);
        // every other fact must be the oracle's.
        for (String field : new String[] {"file", "file_size", "name"}) {
            ours.remove(field);
            oracle.remove(field);
        }
        assertEquals(oracle, ours);
    }

    @Test
    void badArgumentsAreOneLineErrorsWithExitCode2() {
        String out = dir.resolve("x.gguf").toString();
        expectUsageError(
                new String[] {"synth", "--preset", "huge", "--wtype", "q4_0", "-o", out}, "unknown preset 'huge'");
        expectUsageError(
                new String[] {"synth", "--preset", "tiny", "--wtype", "q5_k", "-o", out}, "unknown weight type 'q5_k'");
        expectUsageError(new String[] {"synth", "--preset", "tiny", "--wtype", "f32"}, "needs -o");
        expectUsageError(
                new String[] {"synth", "--preset", "tiny", "--wtype", "f32", "--seed", "x", "-o", out},
                "--seed must be an integer");
        expectUsageError(
                new String[] {
                    "synth",
                    "--preset",
                    "tiny",
                    "--wtype",
                    "f32",
                    "-o",
                    dir.resolve("no/such/dir/x.gguf").toString()
                },
                "no such directory");
        expectUsageError(
                new String[] {"synth", "--preset", "tiny", "--wtype", "f32", "-o", dir.toString()}, "is a directory");
        assertFalse(Files.exists(Path.of(out)));
    }

    private static void expectUsageError(String[] argv, String fragment) {
        MainTest.Result r = MainTest.run(argv);
        assertEquals(2, r.code(), String.join(" ", argv) + ": " + r.err());
        assertEquals(1, r.err().strip().lines().count(), r.err());
        assertTrue(r.err().contains(fragment), r.err());
    }
}
