package dev.glimmer.engine.synth;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * A byte-level BPE vocabulary laid out like GLM-4.7-Flash's: the 256 byte tokens in GPT-2's
 * bytes_to_unicode order, one token per merge (random pairs of earlier tokens), {@code [PADn]}
 * tokens up to the special base, the 36 GLM special tokens, then {@code [PADn]} up to the vocabulary
 * size.
 *
 * @param tokens     the token texts (byte-level: each byte is one printable character)
 * @param tokenTypes llama.cpp token types: 1 normal, 3 control, 5 unused
 * @param merges     "left right" pairs, merge i producing token 256 + i
 */
public record SynthVocab(String[] tokens, long[] tokenTypes, String[] merges) {

    public static final int NORMAL = 1;
    public static final int CONTROL = 3;
    public static final int UNUSED = 5;

    /** GLM-4.7-Flash's special tokens, in id order from the special base (docs/MODEL.md §7). */
    public static final List<String> SPECIAL_TOKENS = List.of(
            "<|endoftext|>",
            "[MASK]",
            "[gMASK]",
            "[sMASK]",
            "<sop>",
            "<eop>",
            "<|system|>",
            "<|user|>",
            "<|assistant|>",
            "<|observation|>",
            "<|begin_of_image|>",
            "<|end_of_image|>",
            "<|begin_of_video|>",
            "<|end_of_video|>",
            "<|begin_of_audio|>",
            "<|end_of_audio|>",
            "<|begin_of_transcription|>",
            "<|end_of_transcription|>",
            "<|code_prefix|>",
            "<|code_middle|>",
            "<|code_suffix|>",
            "<think>",
            "</think>",
            "<tool_call>",
            "</tool_call>",
            "<tool_response>",
            "</tool_response>",
            "<arg_key>",
            "</arg_key>",
            "<arg_value>",
            "</arg_value>",
            "/nothink",
            "<|begin_of_box|>",
            "<|end_of_box|>",
            "<|image|>",
            "<|video|>");

    /** Offsets from the special base of the tokens the special-id keys name. */
    public static final int ENDOFTEXT = 0;

    public static final int GMASK = 2;
    public static final int USER = 7;
    public static final int OBSERVATION = 9;

    /** Longest merged token, in characters: keeps random merges from growing without bound. */
    private static final int MAX_TOKEN_CHARS = 16;

    /** Builds the vocabulary of {@code preset}; the merges depend only on {@code seed}. */
    public static SynthVocab build(SynthPreset preset, long seed) {
        int vocabSize = preset.vocabSize();
        String[] tokens = new String[vocabSize];
        long[] types = new long[vocabSize];
        List<String> byteTokens = byteTokens();
        Set<String> known = new HashSet<>(byteTokens);
        for (int i = 0; i < 256; i++) {
            tokens[i] = byteTokens.get(i);
            types[i] = NORMAL;
        }
        String[] merges = new String[preset.merges()];
        SynthRandom random = SynthRandom.forStream(seed, "tokenizer.ggml.merges", 0);
        // Most merges join pieces of words (ASCII letters, optionally after a space 'Ġ') so that text
        // tokenizes into multi-byte tokens as with a trained vocabulary; the rest join any two tokens.
        List<String> wordPieces = new ArrayList<>();
        for (String t : byteTokens) {
            if (Character.isLetter(t.charAt(0)) && t.charAt(0) < 128 || t.equals("Ġ")) {
                wordPieces.add(t);
            }
        }
        int next = 256;
        while (next < 256 + preset.merges()) {
            boolean word = random.nextInt(10) < 7;
            String left = !word
                    ? tokens[random.nextInt(next)]
                    : random.nextInt(4) == 0 ? "Ġ" : wordPieces.get(random.nextInt(wordPieces.size()));
            String right = word ? wordPieces.get(random.nextInt(wordPieces.size())) : tokens[random.nextInt(next)];
            String merged = left + right;
            // A space ('Ġ') only ever begins a pre-tokenized piece, so it never starts the right half.
            if (right.charAt(0) == 'Ġ' || merged.length() > MAX_TOKEN_CHARS || !known.add(merged)) {
                continue;
            }
            merges[next - 256] = left + " " + right;
            tokens[next] = merged;
            types[next] = NORMAL;
            if (word) {
                wordPieces.add(merged);
            }
            next++;
        }
        for (int i = next; i < vocabSize; i++) {
            int special = i - preset.specialBase();
            boolean isSpecial = special >= 0 && special < SPECIAL_TOKENS.size();
            tokens[i] = isSpecial ? SPECIAL_TOKENS.get(special) : "[PAD" + i + "]";
            types[i] = isSpecial ? CONTROL : UNUSED;
        }
        return new SynthVocab(tokens, types, merges);
    }

    /**
     * GPT-2's bytes_to_unicode order: the printable bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for
     * themselves and come first; the other 68 bytes follow in byte order as U+0100, U+0101, ...
     */
    static List<String> byteTokens() {
        List<String> tokens = new ArrayList<>(256);
        boolean[] printable = new boolean[256];
        for (int b = 0; b < 256; b++) {
            printable[b] = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            if (printable[b]) {
                tokens.add(String.valueOf((char) b));
            }
        }
        int n = 0;
        for (int b = 0; b < 256; b++) {
            if (!printable[b]) {
                tokens.add(String.valueOf((char) (256 + n++)));
            }
        }
        return tokens;
    }
}
