package dev.glimmer.server.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.InvalidInputException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

class ServerConfigLoaderTest {

    @Test
    void bundledDefaultsBindLocalhostWithoutKey() {
        ServerConfig c = ServerConfigLoader.load(Optional.empty(), Map.of(), Map.of());
        assertEquals("127.0.0.1", c.host());
        assertEquals(8080, c.port());
        assertTrue(c.apiKeys().isEmpty());
        assertTrue(c.allowedHosts().isEmpty());
        assertEquals(List.of("local"), c.corsOrigins(), "pages from this machine only");
        assertEquals(4L * 1024 * 1024, c.maxBodyBytes());
        assertEquals(2, c.parallel());
        assertEquals(16, c.queue());
        assertTrue(c.model().isEmpty());
        assertEquals(0.8f, c.sampling().temperature());
        assertEquals(40, c.sampling().topK());
    }

    @Test
    void environmentOverridesYamlAndFlagsOverrideEnvironment() {
        Map<String, String> env = Map.of(
                "GLIMMER_SERVER_PORT",
                "9090",
                "GLIMMER_INFERENCE_KV_BUDGET_MB",
                "512",
                "GLIMMER_SERVER_CORS_ORIGINS",
                "http://a.example, http://b.example");
        ServerConfig c = ServerConfigLoader.load(Optional.empty(), env, Map.of());
        assertEquals(9090, c.port());
        assertEquals(512, c.kvBudgetMb());
        assertEquals(List.of("http://a.example", "http://b.example"), c.corsOrigins());
        ServerConfig flagged = ServerConfigLoader.load(Optional.empty(), env, Map.of("server.port", "7070"));
        assertEquals(7070, flagged.port());
    }

    @Test
    void keysAndAllowedHostsAreCommaSeparatedListsFromEveryLayer() {
        Map<String, String> env = Map.of(
                "GLIMMER_SERVER_ALLOWED_HOSTS", "glimmer.lan, 10.0.0.5,", "GLIMMER_SERVER_API_KEY", "alpha,beta");
        ServerConfig c = ServerConfigLoader.load(Optional.empty(), env, Map.of());
        assertEquals(List.of("glimmer.lan", "10.0.0.5"), c.allowedHosts());
        assertEquals(List.of("alpha", "beta"), c.apiKeys());
        ServerConfig flagged = ServerConfigLoader.load(Optional.empty(), env, Map.of("server.allowed-hosts", "*"));
        assertEquals(List.of("*"), flagged.allowedHosts());
    }

    @Test
    void sizesUnderstandSuffixes() {
        assertEquals(
                64 * 1024,
                ServerConfigLoader.load(Optional.empty(), Map.of(), Map.of("server.max-body", "64K"))
                        .maxBodyBytes());
        assertEquals(
                1000,
                ServerConfigLoader.load(Optional.empty(), Map.of(), Map.of("server.max-body", "1000"))
                        .maxBodyBytes());
    }

    @Test
    void badValuesNameTheKeyAndTheirSource() {
        var e = assertThrows(
                InvalidInputException.class,
                () -> ServerConfigLoader.load(Optional.empty(), Map.of("GLIMMER_SERVER_PORT", "eighty"), Map.of()));
        assertEquals(
                "configuration server.port must be an integer, got 'eighty' (from environment variable"
                        + " GLIMMER_SERVER_PORT)",
                e.getMessage());
        e = assertThrows(
                InvalidInputException.class,
                () -> ServerConfigLoader.load(Optional.empty(), Map.of(), Map.of("inference.parallel", "0")));
        assertTrue(e.getMessage().startsWith("configuration inference.parallel must be in [1, "), e.getMessage());
        e = assertThrows(
                InvalidInputException.class,
                () -> ServerConfigLoader.load(Optional.empty(), Map.of(), Map.of("model.backend", "tpu")));
        assertTrue(e.getMessage().contains("auto, cpu, metal or cuda"), e.getMessage());
        e = assertThrows(
                InvalidInputException.class,
                () -> ServerConfigLoader.load(Optional.empty(), Map.of(), Map.of("server.max-body", "lots")));
        assertTrue(e.getMessage().contains("server.max-body"), e.getMessage());
    }

    @Test
    void aConfigFileReplacesTheBundledOne() throws Exception {
        Path file = Files.createTempFile("glimmer", ".yaml");
        try {
            Files.writeString(file, "server:\n  port: 1234\n  api-key: sesame\n");
            ServerConfig c = ServerConfigLoader.load(Optional.of(file), Map.of(), Map.of());
            assertEquals(1234, c.port());
            assertEquals(List.of("sesame"), c.apiKeys());
            assertEquals("127.0.0.1", c.host());
        } finally {
            Files.delete(file);
        }
        var e = assertThrows(
                InvalidInputException.class,
                () -> ServerConfigLoader.load(Optional.of(Path.of("/no/such.yaml")), Map.of(), Map.of()));
        assertEquals("no such configuration file: /no/such.yaml", e.getMessage());
    }
}
