package dev.glimmer.server.cli;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** {@code serve} refuses bad settings with one line and exit code 2, before binding anything. */
class ServeCommandTest {

    @Test
    void aFileThatIsNoModelEndsServeWithOneLine() throws Exception {
        java.nio.file.Path notAModel = java.nio.file.Files.createTempFile("glimmer", ".gguf");
        try {
            java.nio.file.Files.writeString(notAModel, "not a gguf file");
            MainTest.Result r = MainTest.run("serve", "--model", notAModel.toString(), "--port", "0");
            assertEquals(2, r.code());
            assertTrue(r.err().strip().lines().toList().getLast().startsWith("glimmer serve: cannot serve the model: "),
                    r.err());
        } finally {
            java.nio.file.Files.delete(notAModel);
        }
    }

    @Test
    void badFlagValuesAreUsageErrors() {
        MainTest.Result r = MainTest.run("serve", "--port", "http");
        assertEquals(2, r.code());
        assertEquals("glimmer serve: configuration server.port must be an integer, got 'http' (from the command line)",
                r.err().strip());
        r = MainTest.run("serve", "--parallel", "0");
        assertEquals(2, r.code());
        assertTrue(r.err().contains("inference.parallel must be in [1, 256], got 0"), r.err());
        r = MainTest.run("serve", "--model", "/no/such.gguf");
        assertEquals(2, r.code());
        assertEquals("glimmer serve: no such model file: /no/such.gguf", r.err().strip());
        r = MainTest.run("serve", "--config", "/no/such.yaml");
        assertEquals(2, r.code());
        assertEquals("glimmer serve: no such configuration file: /no/such.yaml", r.err().strip());
    }
}
