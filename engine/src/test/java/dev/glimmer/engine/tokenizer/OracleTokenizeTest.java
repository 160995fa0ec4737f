package dev.glimmer.engine.tokenizer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.glimmer.engine.gguf.GgufFile;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.StreamSupport;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/** Our ids must be llama.cpp's ids, on every reference string, with and without special-token parsing. */
class OracleTokenizeTest {

    static Path oracle(String name) {
        return Path.of("src/test/resources/oracle", name);
    }

    static Tokenizer load(String gguf) throws IOException {
        try (GgufFile f = GgufFile.open(oracle(gguf))) {
            return Tokenizer.fromMetadata(f.metadata());
        }
    }

    @TestFactory
    List<DynamicTest> tinyMatchesLlamaCpp() throws IOException {
        return cases("tiny-f32.gguf", "refs/tiny.tokenize.json");
    }

    @TestFactory
    List<DynamicTest> smallMatchesLlamaCpp() throws IOException {
        return cases("small-q4_k_m.gguf", "refs/small.tokenize.json");
    }

    private static List<DynamicTest> cases(String gguf, String refs) throws IOException {
        JsonNode root = new ObjectMapper().readTree(oracle(refs).toFile());
        assertEquals(gguf, root.get("model").asText());
        Tokenizer tokenizer = load(gguf);
        List<DynamicTest> tests = new ArrayList<>();
        JsonNode cases = root.get("cases");
        assertTrue(cases.size() >= 18, "expected the 18 reference strings, got " + cases.size());
        for (JsonNode c : cases) {
            String text = c.get("text").asText();
            int[] withSpecial = ids(c.get("parse_special"));
            int[] withoutSpecial = ids(c.get("no_parse_special"));
            String name = text.length() > 40 ? text.substring(0, 40) + "..." : text;
            tests.add(DynamicTest.dynamicTest(
                    "parse_special " + name.replace("\n", "\\n"),
                    () -> assertArrayEquals(withSpecial, tokenizer.encode(text, true), text)));
            tests.add(DynamicTest.dynamicTest(
                    "no_parse_special " + name.replace("\n", "\\n"),
                    () -> assertArrayEquals(withoutSpecial, tokenizer.encode(text, false), text)));
        }
        return tests;
    }

    static int[] ids(JsonNode array) {
        return StreamSupport.stream(array.spliterator(), false)
                .mapToInt(JsonNode::asInt)
                .toArray();
    }
}
