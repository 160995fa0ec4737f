package dev.glimmer.server.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.glimmer.server.EngineTestData;
import java.nio.file.Path;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** {@code ./glimmer logits} on the tiny oracle model against llama.cpp's reference logits. */
class LogitsCommandTest {
    /** The oracle data lives in the engine's test resources; tests run in the module directory. */
    static final Path ORACLE = EngineTestData.ORACLE;

    private static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void everyPositionMatchesLlamaCppWithin1e4() throws Exception {
        JsonNode chat = JSON.readTree(
                        ORACLE.resolve("refs/tiny-f32.logits.json").toFile())
                .get("cases")
                .get(0);
        String ids = chat.get("prompt_tokens").toString().replaceAll("[\\[\\]]", "");
        MainTest.Result r = MainTest.run(
                "logits", "--model", ORACLE.resolve("tiny-f32.gguf").toString(), "--tokens", ids, "--all");
        assertEquals(0, r.code(), r.err());
        JsonNode out = JSON.readTree(r.out());
        assertEquals(1024, out.get("n_vocab").asInt());
        assertEquals(chat.get("prompt_tokens"), out.get("tokens"));
        JsonNode logits = out.get("logits");
        assertEquals(chat.get("prompt_tokens").size(), logits.size());
        for (int p = 0; p < logits.size(); p++) {
            for (int i = 0; i < 1024; i++) {
                double diff = Math.abs(logits.get(p).get(i).asDouble()
                        - chat.get("prompt_logits").get(p).get(i).asDouble());
                assertTrue(diff <= 1e-4, "position " + p + " logit " + i + ": |Δ| " + diff);
            }
        }
    }

    /**
     * {@code --backend emulated} (the GPU command lists on the kernel emulator; needs clang-19): every position's
     * logits within 1e-3 of their range of llama.cpp's, the GPU path's tolerance.
     */
    @Test
    void theGpuPathGivesEveryPositionWithinItsTolerance() throws Exception {
        JsonNode chat = JSON.readTree(
                        ORACLE.resolve("refs/tiny-f32.logits.json").toFile())
                .get("cases")
                .get(0);
        int n = 5;
        StringBuilder ids = new StringBuilder();
        for (int i = 0; i < n; i++) {
            ids.append(i == 0 ? "" : ",")
                    .append(chat.get("prompt_tokens").get(i).asInt());
        }
        MainTest.Result r = MainTest.run(
                "logits",
                "--model",
                ORACLE.resolve("tiny-f32.gguf").toString(),
                "--tokens",
                ids.toString(),
                "--all",
                "--backend",
                "emulated");
        assertEquals(0, r.code(), r.err());
        JsonNode logits = JSON.readTree(r.out()).get("logits");
        assertEquals(n, logits.size());
        for (int p = 0; p < n; p++) {
            JsonNode expected = chat.get("prompt_logits").get(p);
            double lo = Double.POSITIVE_INFINITY;
            double hi = Double.NEGATIVE_INFINITY;
            for (JsonNode v : expected) {
                lo = Math.min(lo, v.asDouble());
                hi = Math.max(hi, v.asDouble());
            }
            for (int i = 0; i < expected.size(); i++) {
                double diff = Math.abs(
                        logits.get(p).get(i).asDouble() - expected.get(i).asDouble());
                assertTrue(diff <= 1e-3 * (hi - lo), "position " + p + " logit " + i + ": |Δ| " + diff);
            }
        }
    }

    @Test
    void valuesAreExactFloat32InShortestForm() {
        MainTest.Result r = MainTest.run(
                "logits", "--model", ORACLE.resolve("tiny-f32.gguf").toString(), "--tokens", "962,964,967");
        assertEquals(0, r.code(), r.err());
        Matcher m = Pattern.compile("-?[0-9][0-9.E-]*")
                .matcher(r.out().substring(r.out().indexOf("\"logits\"")));
        int count = 0;
        while (m.find()) {
            String text = m.group();
            float value = Float.parseFloat(text);
            assertEquals(Float.toString(value), text, "not the shortest round-trip form");
            count++;
        }
        assertEquals(1024, count, "one row of the last position's logits");
    }

    @Test
    void badTokensAreOneLineInputErrors() {
        MainTest.Result outside = MainTest.run(
                "logits", "--model", ORACLE.resolve("tiny-f32.gguf").toString(), "--tokens", "1,5000");
        assertEquals(2, outside.code());
        assertTrue(
                outside.err().contains("5000") && outside.err().strip().lines().count() == 1, outside.err());
        MainTest.Result notNumbers = MainTest.run(
                "logits", "--model", ORACLE.resolve("tiny-f32.gguf").toString(), "--tokens", "1,x");
        assertEquals(2, notNumbers.code());
        MainTest.Result notAModel = MainTest.run(
                "logits", "--model", ORACLE.resolve("refs/tiny-f32.logits.json").toString(), "--tokens", "1");
        assertEquals(2, notAModel.code(), notAModel.err());
    }
}
