package dev.glimmer.engine.tokenizer;

import static dev.glimmer.engine.tokenizer.OracleTokenizeTest.ids;
import static dev.glimmer.engine.tokenizer.OracleTokenizeTest.load;
import static dev.glimmer.engine.tokenizer.OracleTokenizeTest.oracle;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.util.HexFormat;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Token pieces, end-of-generation flags, special ids and types against what llama.cpp reported for
 * the oracle models (logits references and generator manifests).
 */
class OracleVocabularyTest {

    @ParameterizedTest
    @CsvSource({"tiny-f32.gguf, refs/tiny-f32.logits.json", "small-q4_k_m.gguf, refs/small-q4_k_m.logits.json"})
    void piecesAndEndOfGenerationMatchLlamaCpp(String gguf, String refs) throws IOException {
        Tokenizer tokenizer = load(gguf);
        JsonNode root = new ObjectMapper().readTree(oracle(refs).toFile());
        int checked = 0;
        for (JsonNode c : root.get("cases")) {
            int[] tokens = ids(c.get("greedy_tokens"));
            for (int k = 0; k < tokens.length; k++) {
                byte[] expected = HexFormat.of()
                        .parseHex(c.get("greedy_pieces_hex").get(k).asText());
                assertArrayEquals(expected, tokenizer.piece(tokens[k], true), "piece of token " + tokens[k]);
                assertEquals(
                        c.get("greedy_is_eog").get(k).asBoolean(),
                        tokenizer.isEndOfGeneration(tokens[k]),
                        "end of generation for token " + tokens[k]);
                checked++;
            }
            if (c.hasNonNull("prompt_text")) {
                assertArrayEquals(
                        ids(c.get("prompt_tokens")),
                        tokenizer.encode(c.get("prompt_text").asText(), true));
            }
        }
        assertEquals(64, checked);
    }

    @ParameterizedTest
    @CsvSource({"tiny-f32.gguf, tiny-f32.manifest.json", "small-q4_k_m.gguf, small-q4_k_m.manifest.json"})
    void specialTokensAreTheGlmOnes(String gguf, String manifest) throws IOException {
        Tokenizer tokenizer = load(gguf);
        JsonNode vocab = new ObjectMapper().readTree(oracle(manifest).toFile()).get("vocab");
        JsonNode named = vocab.get("special_ids");
        assertEquals(vocab.get("size").asInt(), tokenizer.vocabularySize());

        SpecialTokens s = tokenizer.specialTokens();
        assertEquals(named.get("[gMASK]").asInt(), s.bos());
        assertEquals(named.get("<|endoftext|>").asInt(), s.eos());
        assertEquals(named.get("<|user|>").asInt(), s.eot());
        assertEquals(named.get("<|observation|>").asInt(), s.eom());
        assertEquals(named.get("<|endoftext|>").asInt(), s.pad());
        assertEquals(named.get("<|endoftext|>").asInt(), s.unk());
        assertFalse(s.addBos());
        assertFalse(s.addEos());
        Set<Integer> eog = new TreeSet<>(Set.of(
                named.get("<|endoftext|>").asInt(),
                named.get("<|user|>").asInt(),
                named.get("<|observation|>").asInt()));
        assertEquals(eog, s.endOfGeneration());

        // Every named special token is a control token whose text is its name.
        named.properties().forEach(e -> {
            int id = e.getValue().asInt();
            assertEquals(e.getKey(), tokenizer.tokenText(id));
            assertEquals(TokenType.CONTROL, tokenizer.tokenType(id), e.getKey());
            assertEquals(id, tokenizer.tokenId(e.getKey()).orElseThrow());
        });
        // The 256 byte-level characters are normal tokens.
        assertEquals(
                TokenType.NORMAL, tokenizer.tokenType(tokenizer.tokenId("!").orElseThrow()));
        assertEquals(
                TokenType.NORMAL,
                tokenizer.tokenType(tokenizer.tokenId("\u0120").orElseThrow()));
        assertTrue(tokenizer.tokenId("no such token").isEmpty());
    }
}
