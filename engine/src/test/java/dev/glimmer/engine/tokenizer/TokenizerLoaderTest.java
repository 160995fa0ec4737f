package dev.glimmer.engine.tokenizer;

import static dev.glimmer.engine.tokenizer.OracleTokenizeTest.oracle;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.gguf.GgufMetadata;
import dev.glimmer.engine.gguf.GgufValue;
import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Loading from metadata: what is refused and what the optional keys change, on the tiny model's metadata. */
class TokenizerLoaderTest {

    static Map<String, GgufValue> tinyMetadata() throws IOException {
        try (GgufFile f = GgufFile.open(oracle("tiny-f32.gguf"))) {
            return new LinkedHashMap<>(f.metadata().entries());
        }
    }

    static String refusal(Map<String, GgufValue> entries) {
        return assertThrows(InvalidInputException.class, () -> Tokenizer.fromMetadata(new GgufMetadata(entries)))
                .getMessage();
    }

    // Each refusal test edits the tiny model's metadata and reads the message: the form repeats by design.
    @Test
    void refusesOtherTokenizerModels() throws IOException {
        Map<String, GgufValue> md = tinyMetadata();
        md.put("tokenizer.ggml.model", GgufValue.of("llama"));
        assertEquals(
                "unsupported tokenizer 'llama' in tokenizer.ggml.model (only byte-level BPE, 'gpt2', is supported)",
                refusal(md));
        md.remove("tokenizer.ggml.model");
        assertEquals("the model has no tokenizer (metadata key tokenizer.ggml.model is missing)", refusal(md));
    }

    @Test
    void refusesOtherPreTokenizers() throws IOException {
        Map<String, GgufValue> md = tinyMetadata();
        md.put("tokenizer.ggml.pre", GgufValue.of("qwen2"));
        assertEquals(
                "unsupported pre-tokenizer 'qwen2' in tokenizer.ggml.pre (supported: glm4, chatglm-bpe)", refusal(md));
        md.put("tokenizer.ggml.pre", GgufValue.of("chatglm-bpe"));
        Tokenizer.fromMetadata(new GgufMetadata(md));
    }

    @Test
    void addBosKeyPrependsTheBosToken() throws IOException {
        Map<String, GgufValue> md = tinyMetadata();
        Tokenizer plain = Tokenizer.fromMetadata(new GgufMetadata(md));
        md.put("tokenizer.ggml.add_bos_token", GgufValue.bool(true));
        Tokenizer withBos = Tokenizer.fromMetadata(new GgufMetadata(md));
        int[] ids = plain.encode("Hello world", true);
        int[] expected = new int[ids.length + 1];
        expected[0] = plain.specialTokens().bos();
        System.arraycopy(ids, 0, expected, 1, ids.length);
        assertArrayEquals(expected, withBos.encode("Hello world", true));

        md.remove("tokenizer.ggml.bos_token_id");
        assertEquals("tokenizer.ggml.add_bos_token is true but the model has no bos token", refusal(md));
    }

    @Test
    void duplicateTokensAreRefused() throws IOException {
        Map<String, GgufValue> md = tinyMetadata();
        String[] tokens =
                new GgufMetadata(md).stringArray("tokenizer.ggml.tokens").clone();
        tokens[5] = tokens[4];
        md.put("tokenizer.ggml.tokens", GgufValue.array(GgufValue.GgufArray.strings(tokens)));
        assertEquals("duplicate token in tokenizer.ggml.tokens: '" + tokens[4] + "' has ids 4 and 5", refusal(md));
    }

    @Test
    void byteTokensStandForTheirByte() throws IOException {
        Map<String, GgufValue> md = tinyMetadata();
        GgufMetadata original = new GgufMetadata(md);
        String[] tokens = original.stringArray("tokenizer.ggml.tokens").clone();
        long[] types = original.integerArray("tokenizer.ggml.token_type").clone();
        tokens[1000] = "<0xE2>";
        types[1000] = TokenType.BYTE.ggufId();
        md.put("tokenizer.ggml.tokens", GgufValue.array(GgufValue.GgufArray.strings(tokens)));
        md.put(
                "tokenizer.ggml.token_type",
                GgufValue.array(GgufValue.GgufArray.ints(dev.glimmer.engine.gguf.GgufValueType.INT32, types)));
        Tokenizer tokenizer = Tokenizer.fromMetadata(new GgufMetadata(md));
        assertEquals(TokenType.BYTE, tokenizer.tokenType(1000));
        assertArrayEquals(new byte[] {(byte) 0xE2}, tokenizer.piece(1000, false));

        tokens[1000] = "<0xZZ>";
        md.put("tokenizer.ggml.tokens", GgufValue.array(GgufValue.GgufArray.strings(tokens)));
        assertEquals("byte token '<0xZZ>' in tokenizer.ggml.tokens is not of the form <0xAB>", refusal(md));
    }
}
