package dev.glimmer.server.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** {@code serve} refuses bad settings with one line and exit code 2, before binding anything. */
class ServeCommandTest {

    @Test
    void aFileThatIsNoModelEndsServeWithOneLine() throws Exception {
        java.nio.file.Path notAModel = java.nio.file.Files.createTempFile("glimmer", ".gguf");
        try {
            java.nio.file.Files.writeString(notAModel, "not a gguf file");
            MainTest.Result r = MainTest.run("serve", "--model", notAModel.toString(), "--port", "0");
            assertEquals(2, r.code());
            assertTrue(
                    r.err().strip().lines().toList().getLast().startsWith("glimmer serve: cannot serve the model: "),
                    r.err());
        } finally {
            java.nio.file.Files.delete(notAModel);
        }
    }

    @Test
    void badFlagValuesAreUsageErrors() {
        MainTest.Result r = MainTest.run("serve", "--port", "http");
        assertEquals(2, r.code());
        assertEquals(
                "glimmer serve: --port must be an integer, got 'http'", r.err().strip());
        r = MainTest.run("serve", "--parallel", "0");
        assertEquals(2, r.code());
        assertEquals(
                "glimmer serve: --parallel must be in [1, 256], got 0", r.err().strip());
        r = MainTest.run("serve", "--ctx", "-5");
        assertEquals(2, r.code());
        assertEquals(
                "glimmer serve: --ctx must be in [0, 16777216], got -5", r.err().strip());
        r = MainTest.run("serve", "--ctx", "8");
        assertEquals(2, r.code());
        assertEquals(
                "glimmer serve: --ctx must be at least 16 (or 0: the model's own, at most 8192), got 8",
                r.err().strip());
        r = MainTest.run("serve", "--backend", "tpu");
        assertEquals(2, r.code());
        assertTrue(r.err().startsWith("glimmer serve: --backend must be "), r.err());
        r = MainTest.run("serve", "--model", "/no/such.gguf");
        assertEquals(2, r.code());
        assertEquals("glimmer serve: no such model file: /no/such.gguf", r.err().strip());
        r = MainTest.run("serve", "--config", "/no/such.yaml");
        assertEquals(2, r.code());
        assertEquals(
                "glimmer serve: no such configuration file: /no/such.yaml",
                r.err().strip());
    }

    /** The help says what the README says: threads per physical core, the key also as x-api-key. */
    @Test
    void helpAgreesWithTheReadme() {
        String help = MainTest.run("serve", "--help").out();
        assertTrue(help.contains("one per physical core"), help);
        assertTrue(help.contains("'x-api-key: K'"), help);
        assertTrue(help.contains("(default: the model's own, at most 8192)"), help);
    }
}
