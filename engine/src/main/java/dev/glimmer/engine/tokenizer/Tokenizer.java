package dev.glimmer.engine.tokenizer;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.gguf.GgufMetadata;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.OptionalInt;

/**
 * The model's tokenizer: text to token ids and back, behaving like llama.cpp's for the same GGUF
 * file. Byte-level BPE ({@code tokenizer.ggml.model = gpt2}) with the {@code glm4} pre-tokenizer.
 *
 * <p>Encoding: special tokens are cut out first ({@link SpecialTokenSplitter}), the remaining text is
 * split into words ({@link Glm4WordSplitter}) and each word's UTF-8 bytes are merged by BPE
 * ({@link BpeEncoder}). Decoding concatenates the tokens' bytes.
 *
 * <p>Immutable apart from an internal word cache; safe to share between threads.
 */
public final class Tokenizer {
    private final String[] texts;
    private final TokenType[] types;
    private final Map<String, Integer> idsByText;
    /** Each token's output bytes (control tokens rendered as their text). */
    private final byte[][] pieces;

    private final SpecialTokens special;
    private final SpecialTokenSplitter specialSplitter;
    private final BpeEncoder bpe;

    Tokenizer(
            String[] texts, TokenType[] types, Map<String, Integer> idsByText, SpecialTokens special, BpeEncoder bpe) {
        this.texts = texts;
        this.types = types;
        this.idsByText = idsByText;
        this.special = special;
        this.bpe = bpe;
        this.specialSplitter = new SpecialTokenSplitter(texts, types);
        this.pieces = new byte[texts.length][];
        for (int id = 0; id < texts.length; id++) {
            pieces[id] = renderPiece(texts[id], types[id]);
        }
    }

    /**
     * Builds the tokenizer described by a GGUF file's {@code tokenizer.ggml.*} metadata.
     *
     * @throws InvalidInputException if the tokenizer is missing, malformed or of a kind not supported
     */
    public static Tokenizer fromMetadata(GgufMetadata metadata) {
        return TokenizerLoader.load(metadata);
    }

    public int vocabularySize() {
        return texts.length;
    }

    /** The token's text as stored in the vocabulary (byte-level characters for normal tokens). */
    public String tokenText(int id) {
        checkId(id);
        return texts[id];
    }

    public TokenType tokenType(int id) {
        checkId(id);
        return types[id];
    }

    /** The id of the vocabulary entry with exactly this text, if any (e.g. {@code "<|user|>"}). */
    public OptionalInt tokenId(String text) {
        Integer id = idsByText.get(text);
        return id == null ? OptionalInt.empty() : OptionalInt.of(id);
    }

    public SpecialTokens specialTokens() {
        return special;
    }

    /** Whether generating this id ends the reply (e.g. {@code <|endoftext|>}, {@code <|user|>}). */
    public boolean isEndOfGeneration(int id) {
        return special.isEndOfGeneration(id);
    }

    /**
     * Encodes text as llama.cpp's {@code llama_tokenize(text, add_special = true, parse_special)}:
     * BOS/EOS are added only if the model's metadata asks for it (GLM-4.7-Flash does not).
     *
     * @param parseSpecial whether control tokens written in the text (e.g. {@code <|user|>}) become
     *                     those tokens; when false their text is encoded as ordinary text. User-defined
     *                     tokens are recognised either way.
     *
     * Unpaired UTF-16 surrogates (not representable in UTF-8) are encoded as U+FFFD, the character
     * llama.cpp substitutes for invalid input.
     */
    public int[] encode(String text, boolean parseSpecial) {
        String clean = replaceUnpairedSurrogates(text);
        IntList out = new IntList(Math.max(16, clean.length() / 3));
        if (special.addBos()) {
            out.add(special.bos());
        }
        BpeEncoder.Scratch scratch = new BpeEncoder.Scratch();
        for (SpecialTokenSplitter.Piece piece : specialSplitter.split(clean, parseSpecial)) {
            switch (piece) {
                case SpecialTokenSplitter.Special(int id) -> out.add(id);
                case SpecialTokenSplitter.Text(int start, int end) -> {
                    for (int wordStart = start; wordStart < end; ) {
                        int wordEnd = Glm4WordSplitter.wordEnd(clean, wordStart, end);
                        bpe.encodeWord(clean, wordStart, wordEnd, scratch, out);
                        wordStart = wordEnd;
                    }
                }
            }
        }
        if (special.addEos()) {
            out.add(special.eos());
        }
        return out.toArray();
    }

    /**
     * The bytes a token stands for. Control and unknown tokens give their text when
     * {@code renderControl} is set and nothing otherwise; unused tokens give nothing.
     */
    public byte[] piece(int id, boolean renderControl) {
        checkId(id);
        if (!renderControl && types[id].isControlLike()) {
            return new byte[0];
        }
        return pieces[id].clone();
    }

    /**
     * Decodes ids to text: the tokens' bytes concatenated and read as UTF-8 (invalid sequences become
     * U+FFFD). No spaces are added or removed.
     *
     * @throws InvalidInputException if an id is not in the vocabulary
     */
    public String decode(int[] ids, boolean renderControl) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        for (int id : ids) {
            checkId(id);
            if (renderControl || !types[id].isControlLike()) {
                bytes.writeBytes(pieces[id]);
            }
        }
        return bytes.toString(StandardCharsets.UTF_8);
    }

    /** A fresh decoder for one stream of generated tokens. */
    public StreamingDetokenizer streamingDetokenizer(boolean renderControl) {
        return new StreamingDetokenizer(this, renderControl);
    }

    private void checkId(int id) {
        if (id < 0 || id >= texts.length) {
            throw new InvalidInputException("token id " + id + " is out of range: the vocabulary has " + texts.length
                    + " tokens (ids 0.." + (texts.length - 1) + ")");
        }
    }

    /**
     * What a token prints as: control, unknown and user-defined tokens print their text; normal tokens
     * map each byte-level character back to its byte; byte tokens ({@code <0xAB>}) are their byte;
     * unused and undefined tokens print nothing.
     */
    private static byte[] renderPiece(String text, TokenType type) {
        return switch (type) {
            case CONTROL, UNKNOWN, USER_DEFINED -> text.getBytes(StandardCharsets.UTF_8);
            case NORMAL -> byteLevelDecode(text);
            case BYTE -> new byte[] {byteTokenValue(text)};
            case UNUSED, UNDEFINED -> new byte[0];
        };
    }

    /** The byte of a byte token, written {@code <0xAB>}. */
    private static byte byteTokenValue(String text) {
        if (text.length() != 6
                || !text.startsWith("<0x")
                || !text.endsWith(">")
                || Character.digit(text.charAt(3), 16) < 0
                || Character.digit(text.charAt(4), 16) < 0) {
            throw new InvalidInputException(
                    "byte token '" + text + "' in tokenizer.ggml.tokens is not of the form <0xAB>");
        }
        return (byte) Integer.parseInt(text.substring(3, 5), 16);
    }

    private static byte[] byteLevelDecode(String text) {
        byte[] bytes = new byte[text.length()];
        for (int i = 0; i < text.length(); i++) {
            int b = ByteLevel.byteOf(text.charAt(i));
            if (b < 0) {
                return byteLevelDecodeWithMarkers(text);
            }
            bytes[i] = (byte) b;
        }
        return bytes;
    }

    /** The rare token with a character outside the byte-level alphabet: llama.cpp prints a marker for it. */
    private static byte[] byteLevelDecodeWithMarkers(String text) {
        ByteArrayOutputStream out = new ByteArrayOutputStream(text.length());
        text.codePoints().forEach(cp -> {
            int b = ByteLevel.byteOf(cp);
            if (b >= 0) {
                out.write(b);
            } else {
                StringBuilder marker = new StringBuilder("[UNK_BYTE_0x");
                for (byte u : Character.toString(cp).getBytes(StandardCharsets.UTF_8)) {
                    marker.append(String.format("%02x", u & 0xFF));
                }
                marker.append(text).append(']');
                out.writeBytes(marker.toString().getBytes(StandardCharsets.UTF_8));
            }
        });
        return out.toByteArray();
    }

    private static String replaceUnpairedSurrogates(String s) {
        int n = s.length();
        StringBuilder sb = null;
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            if (!Character.isSurrogate(c)) {
                if (sb != null) {
                    sb.append(c);
                }
                continue;
            }
            boolean paired = Character.isHighSurrogate(c) && i + 1 < n && Character.isLowSurrogate(s.charAt(i + 1));
            if (paired) {
                if (sb != null) {
                    sb.append(c).append(s.charAt(i + 1));
                }
                i++;
            } else {
                if (sb == null) {
                    sb = new StringBuilder(n).append(s, 0, i);
                }
                sb.append('\uFFFD');
            }
        }
        return sb == null ? s : sb.toString();
    }
}
