package dev.glimmer.engine.tokenizer;

import static dev.glimmer.engine.tokenizer.OracleTokenizeTest.oracle;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.gguf.GgufFile;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Hard inputs, checked against {@link ReferenceEncoder} (the same expression run by java.util.regex,
 * textbook BPE) on the tiny oracle vocabulary, plus round trips and streaming decode.
 */
class TokenizerTest {
    static Tokenizer tokenizer;
    static ReferenceEncoder reference;

    /** Pieces that exercise every branch of the expression and the character classes. */
    static final String[] ALPHABET = {
        "a",
        "Z",
        "é",
        "ß",
        "я",
        "Ж",
        "我",
        "工作",
        "ﾀ",
        "ǅ",
        "ʰ", // letters (Ll Lu Lo Lt Lm)
        "0",
        "7",
        "٣",
        "²",
        "Ⅻ",
        "½", // numbers (Nd No Nl)
        " ",
        " ",
        "  ",
        "\t",
        "\n",
        "\r",
        "\r\n",
        "\u000B",
        "\f", // ASCII whitespace
        "\u00A0",
        "\u3000",
        "\u2028",
        "\u0085",
        "\u2003",
        "\u001C", // Unicode spaces; U+001C is not \s
        "'",
        "'s",
        "'T",
        "'re",
        "'VE",
        "'ll",
        "'d",
        "'m",
        "'x", // contractions
        ".",
        ",",
        "!",
        "?",
        "(",
        ")",
        "-",
        "_",
        "#",
        "$",
        "~",
        "\"", // punctuation and symbols
        "\u0301",
        "\u200D",
        "\uFE0F",
        "\u0000", // combining mark, ZWJ, VS16, NUL
        "🚀",
        "🦙",
        "😶\u200D🌫️",
        "👩🏽\u200D💻",
        "𝔘", // astral: emoji, ZWJ, math letter
        "<|user|>",
        "<think>", // control tokens' text
    };

    @BeforeAll
    static void load() throws IOException {
        try (GgufFile f = GgufFile.open(oracle("tiny-f32.gguf"))) {
            tokenizer = Tokenizer.fromMetadata(f.metadata());
            reference = new ReferenceEncoder(f.metadata());
        }
    }

    static String randomText(Random random, int pieces) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < pieces; i++) {
            sb.append(ALPHABET[random.nextInt(ALPHABET.length)]);
        }
        return sb.toString();
    }

    static List<String> hardCases() {
        List<String> cases = new ArrayList<>(List.of(
                " ".repeat(1000) + "x",
                " ".repeat(1000),
                "a" + " ".repeat(17) + "b" + "\t".repeat(9) + "c" + " \t \u00A0 ".repeat(50) + "d",
                "\n".repeat(300) + "x\r\n\r\n  \r\n\t\ny \n",
                "line1\r\nline2\r\n\r\n\r\rline3\n\r",
                "   \n   x   \n\n   ",
                "Hello мир 世界 مرحبا שלום नमस्ते Γειά σου こんにちは 안녕하세요",
                "1".repeat(1001) + " 12 123 1234 12345 ٣٤٥٦ ²³ ⅫⅫ 3.14159 1e-5 0x1F",
                "I'm you'RE they've WE'LL she'd it's 'S 'x can't won't o'clock '' ''s",
                "😶\u200D🌫️👩🏽\u200D💻🏳️\u200D🌈 ✅🚀 family: 👨\u200D👩\u200D👧\u200D👦",
                "e\u0301 n\u0303 \u0915\u094D\u0937 caf\u00E9 cafe\u0301",
                "tab\tsep\tvalues\n\u000B\f\u0085\u2028\u2029 end",
                "  leading and trailing  ",
                "{\"json\": [1, 2, 3], \"nested\": {\"k\": null}}",
                "def f(x):\n\treturn x ** 2  # comment\n\n\nclass A:\n    pass\n"));
        Random random = new Random(20251121);
        for (int i = 0; i < 300; i++) {
            cases.add(randomText(random, 1 + random.nextInt(40)));
        }
        return cases;
    }

    @Test
    void wordsAreThoseOfTheExpression() {
        for (String text : hardCases()) {
            List<String> words = new ArrayList<>();
            for (int start = 0; start < text.length(); ) {
                int end = Glm4WordSplitter.wordEnd(text, start, text.length());
                words.add(text.substring(start, end));
                start = end;
            }
            assertEquals(ReferenceEncoder.words(text), words, text);
        }
    }

    @Test
    void plainTextEncodingEqualsTheReference() {
        for (String text : hardCases()) {
            assertArrayEquals(reference.encode(text), tokenizer.encode(text, false), text);
        }
    }

    @Test
    void decodeInvertsEncode() {
        for (String text : hardCases()) {
            assertEquals(text, tokenizer.decode(tokenizer.encode(text, false), true), text);
            assertEquals(text, tokenizer.decode(tokenizer.encode(text, true), true), text);
        }
    }

    @Test
    void controlTokensAreParsedOnlyWhenAsked() {
        int user = tokenizer.tokenId("<|user|>").orElseThrow();
        int[] parsed = tokenizer.encode("Hi<|user|>", true);
        assertEquals(user, parsed[parsed.length - 1]);
        int[] plain = tokenizer.encode("Hi<|user|>", false);
        assertFalse(java.util.Arrays.stream(plain).anyMatch(id -> id == user));
        assertArrayEquals(reference.encode("Hi<|user|>"), plain);
        // Hidden on output unless rendered.
        assertEquals("Hi", tokenizer.decode(parsed, false));
        assertEquals("Hi<|user|>", tokenizer.decode(parsed, true));
        // Adjacent and overlapping markup: longest token first, then left to right.
        int[] tags = tokenizer.encode("<think></think><think><|user|><|user|>", true);
        assertArrayEquals(
                new int[] {
                    tokenizer.tokenId("<think>").orElseThrow(),
                    tokenizer.tokenId("</think>").orElseThrow(),
                    tokenizer.tokenId("<think>").orElseThrow(),
                    user,
                    user
                },
                tags);
    }

    @Test
    void hundredKilobytesMatchTheReferenceAndRoundTrip() {
        Random random = new Random(7);
        StringBuilder sb = new StringBuilder();
        String[] sentences = {
            "The quick brown fox jumps over the lazy dog. ",
            "It's 2025-01-19, isn't it?\n",
            "Numbers: 1234567 and 3.14159; ",
            "Ünïcödé wörds and 中文字符。",
            "  indented\tcode(x, y);\r\n"
        };
        while (sb.length() < 100_000) {
            sb.append(random.nextInt(4) == 0 ? randomText(random, 8) : sentences[random.nextInt(sentences.length)]);
        }
        String text = sb.toString();
        int[] ids = tokenizer.encode(text, false);
        assertArrayEquals(reference.encode(text), ids);
        assertEquals(text, tokenizer.decode(ids, true));
    }

    @Test
    void unpairedSurrogatesEncodeAsReplacementCharacter() {
        String lone = "a\uD83D b \uDE80c\uD83D";
        String replaced = "a\uFFFD b \uFFFDc\uFFFD";
        assertArrayEquals(tokenizer.encode(replaced, false), tokenizer.encode(lone, false));
        assertEquals(replaced, tokenizer.decode(tokenizer.encode(lone, false), true));
        // A proper pair is one code point and survives.
        assertEquals("🚀", tokenizer.decode(tokenizer.encode("\uD83D\uDE80", false), true));
    }

    @Test
    void emptyTextHasNoTokens() {
        assertEquals(0, tokenizer.encode("", true).length);
        assertEquals("", tokenizer.decode(new int[0], true));
    }

    @Test
    void streamingNeverEmitsHalfACharacter() {
        String text = "Ж 我想🚀 😶\u200D🌫️ ok";
        int[] ids = tokenizer.encode(text, false);
        StreamingDetokenizer stream = tokenizer.streamingDetokenizer(true);
        StringBuilder out = new StringBuilder();
        int emptyChunks = 0;
        for (int id : ids) {
            String chunk = stream.next(id);
            assertFalse(chunk.contains("\uFFFD"), "half a character in " + chunk);
            emptyChunks += chunk.isEmpty() ? 1 : 0;
            out.append(chunk);
        }
        out.append(stream.finish());
        assertEquals(text, out.toString());
        assertTrue(
                emptyChunks > 0,
                "the text should split some characters across tokens: " + java.util.Arrays.toString(ids));
    }

    @Test
    void streamingHoldsTheRocketUntilItsLastByte() {
        // The tiny vocabulary splits the rocket's four bytes over several tokens.
        int[] ids = tokenizer.encode("🚀", false);
        assertTrue(ids.length > 1, java.util.Arrays.toString(ids));
        StreamingDetokenizer stream = tokenizer.streamingDetokenizer(false);
        for (int i = 0; i < ids.length - 1; i++) {
            assertEquals("", stream.next(ids[i]));
        }
        assertEquals("🚀", stream.next(ids[ids.length - 1]));
        assertEquals("", stream.finish());
    }

    @Test
    void streamingTurnsACharacterThatNeverCompletesIntoReplacement() {
        int[] ids = tokenizer.encode("🚀", false);
        StreamingDetokenizer stream = tokenizer.streamingDetokenizer(false);
        for (int i = 0; i < ids.length - 1; i++) {
            assertEquals("", stream.next(ids[i]));
        }
        assertEquals("\uFFFDa", stream.next(tokenizer.tokenId("a").orElseThrow()) + stream.finish());
        // And an incomplete character at the very end comes out on finish.
        StreamingDetokenizer cut = tokenizer.streamingDetokenizer(false);
        assertEquals("", cut.next(ids[0]));
        assertEquals("\uFFFD", cut.finish());
    }

    @Test
    void streamingHidesControlTokensUnlessRendered() {
        int[] ids = tokenizer.encode("<think>hm</think>", true);
        StreamingDetokenizer hidden = tokenizer.streamingDetokenizer(false);
        StreamingDetokenizer shown = tokenizer.streamingDetokenizer(true);
        StringBuilder h = new StringBuilder();
        StringBuilder s = new StringBuilder();
        for (int id : ids) {
            h.append(hidden.next(id));
            s.append(shown.next(id));
        }
        assertEquals("hm", h.toString());
        assertEquals("<think>hm</think>", s.toString());
    }

    @Test
    void outOfRangeIdsAreRejectedWithTheVocabularySize() {
        InvalidInputException e =
                assertThrows(InvalidInputException.class, () -> tokenizer.decode(new int[] {1, 1024}, true));
        assertEquals("token id 1024 is out of range: the vocabulary has 1024 tokens (ids 0..1023)", e.getMessage());
        assertThrows(
                InvalidInputException.class,
                () -> tokenizer.streamingDetokenizer(true).next(-1));
    }
}
