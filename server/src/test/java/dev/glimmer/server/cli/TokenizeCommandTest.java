package dev.glimmer.server.cli;

import static dev.glimmer.server.cli.MainTest.run;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.glimmer.server.EngineTestData;
import java.io.IOException;
import java.nio.file.Path;
import java.util.stream.Collectors;
import java.util.stream.StreamSupport;
import org.junit.jupiter.api.Test;

/** The tokenize and detokenize commands on the tiny oracle model, against llama.cpp's ids. */
class TokenizeCommandTest {
    static final Path ORACLE = EngineTestData.ORACLE;
    static final String MODEL = ORACLE.resolve("tiny-f32.gguf").toString();

    /** The llama.cpp reference case for this text. */
    static JsonNode referenceCase(String text) throws IOException {
        JsonNode root = new ObjectMapper()
                .readTree(ORACLE.resolve("refs/tiny.tokenize.json").toFile());
        for (JsonNode c : root.get("cases")) {
            if (c.get("text").asText().equals(text)) {
                return c;
            }
        }
        throw new AssertionError("no reference case for " + text);
    }

    static String json(JsonNode ids) {
        return "{\"ids\":["
                + StreamSupport.stream(ids.spliterator(), false)
                        .map(JsonNode::toString)
                        .collect(Collectors.joining(","))
                + "]}\n";
    }

    static String commaList(JsonNode ids) {
        return StreamSupport.stream(ids.spliterator(), false)
                .map(JsonNode::toString)
                .collect(Collectors.joining(","));
    }

    @Test
    void tokenizePrintsLlamaCppIdsAsOneJsonLine() throws IOException {
        String text = "<|user|>Hello<|assistant|></think>Hi!<|endoftext|>";
        JsonNode c = referenceCase(text);

        MainTest.Result special = run("tokenize", "--model", MODEL, "--text", text);
        assertEquals(0, special.code(), special.err());
        assertEquals(json(c.get("parse_special")), special.out());

        MainTest.Result plain = run("tokenize", "--model", MODEL, "--text", text, "--no-special");
        assertEquals(0, plain.code(), plain.err());
        assertEquals(json(c.get("no_parse_special")), plain.out());
    }

    @Test
    void detokenizePrintsTheTextBack() throws IOException {
        String text = "<|user|>Hello<|assistant|></think>Hi!<|endoftext|>";
        JsonNode ids = referenceCase(text).get("parse_special");

        MainTest.Result rendered = run("detokenize", "--model", MODEL, "--ids", commaList(ids));
        assertEquals(0, rendered.code(), rendered.err());
        assertEquals(text, rendered.out());

        MainTest.Result hidden = run("detokenize", "--model", MODEL, "--ids", commaList(ids), "--no-special");
        assertEquals(0, hidden.code(), hidden.err());
        assertEquals("HelloHi!", hidden.out());

        String emoji = "emoji 🚀🦙 ✅ 😶\u200d🌫️";
        MainTest.Result unicode = run(
                "detokenize",
                "--model",
                MODEL,
                "--ids",
                commaList(referenceCase(emoji).get("no_parse_special")));
        assertEquals(emoji, unicode.out());
    }

    @Test
    void outOfRangeIdIsAOneLineInputError() {
        MainTest.Result r = run("detokenize", "--model", MODEL, "--ids", "361,1024");
        assertEquals(2, r.code());
        assertEquals("", r.out());
        assertEquals(
                "glimmer detokenize: token id 1024 is out of range: the vocabulary has 1024 tokens (ids 0..1023)\n",
                r.err());
        MainTest.Result negative = run("detokenize", "--model", MODEL, "--ids", "-5");
        assertEquals(2, negative.code());
        assertTrue(negative.err().contains("token id -5 is out of range"), negative.err());
    }

    @Test
    void badArgumentsAreUsageErrors() {
        MainTest.Result notNumbers = run("detokenize", "--model", MODEL, "--ids", "1,x");
        assertEquals(2, notNumbers.code());
        assertEquals("glimmer detokenize: --ids must be an integer, got 'x'\n", notNumbers.err());

        MainTest.Result noFile = run("tokenize", "--model", "no/such.gguf", "--text", "hi");
        assertEquals(2, noFile.code());
        assertEquals("glimmer tokenize: no such file: no/such.gguf\n", noFile.err());

        MainTest.Result noText = run("tokenize", "--model", MODEL);
        assertEquals(2, noText.code());
        assertTrue(noText.err().contains("--text"), noText.err());

        MainTest.Result stray = run("tokenize", "--model", MODEL, "--text", "hi", "extra");
        assertEquals(2, stray.code());
        assertEquals("glimmer tokenize: unexpected argument 'extra' (see ./glimmer tokenize --help)\n", stray.err());
    }

    /** After an option that takes a value, the next word is that value, even when it starts with a dash. */
    @Test
    void aValueMayStartWithADash() {
        MainTest.Result dash = run("tokenize", "--model", MODEL, "--text", "-h");
        assertEquals(0, dash.code(), dash.err());
        MainTest.Result same = run("tokenize", "--model", MODEL, "--text=-h");
        assertEquals(dash.out(), same.out());
        assertEquals(
                "-h",
                run("detokenize", "--model", MODEL, "--ids", dash.out().replaceAll("[^0-9,]", ""))
                        .out());
    }
}
