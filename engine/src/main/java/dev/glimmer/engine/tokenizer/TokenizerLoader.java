package dev.glimmer.engine.tokenizer;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.gguf.GgufMetadata;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * Reads a tokenizer from GGUF metadata and settles everything llama.cpp settles at load time: token
 * types, merge ranks, the special ids (from the {@code tokenizer.ggml.*_token_id} keys, else by
 * well-known token text) and the end-of-generation set.
 */
final class TokenizerLoader {
    static final String MODEL_KEY = "tokenizer.ggml.model";
    static final String PRE_KEY = "tokenizer.ggml.pre";
    static final String TOKENS_KEY = "tokenizer.ggml.tokens";
    static final String TYPES_KEY = "tokenizer.ggml.token_type";
    static final String MERGES_KEY = "tokenizer.ggml.merges";

    /** Pre-tokenizer names llama.cpp maps to the GLM-4 expression. */
    private static final Set<String> GLM4_PRE = Set.of("glm4", "chatglm-bpe");

    // Token texts llama.cpp recognises when the metadata names no id. A token found this way that is
    // not typed as control is made control, as llama.cpp does.
    private static final List<String> EOT_TEXTS = List.of(
            "<|eot_id|>",
            "<|im_end|>",
            "<|end|>",
            "<end_of_turn>",
            "<|endoftext|>",
            "<|end_of_text|>",
            "<EOT>",
            "_<EOT>",
            "[EOT]",
            "<｜end▁of▁sentence｜>",
            "<end_of_utterance>");
    private static final List<String> EOM_TEXTS = List.of("<|eom_id|>");
    private static final List<String> FIM_PRE_TEXTS = List.of(
            "<|fim_prefix|>",
            "<fim-prefix>",
            "<fim_prefix>",
            "<｜fim▁begin｜>",
            "<PRE>",
            "▁<PRE>",
            "<|code_prefix|>",
            "<|prefix|>");
    private static final List<String> FIM_SUF_TEXTS = List.of(
            "<|fim_suffix|>",
            "<fim-suffix>",
            "<fim_suffix>",
            "<｜fim▁hole｜>",
            "<SUF>",
            "▁<SUF>",
            "<|code_suffix|>",
            "<|suffix|>");
    private static final List<String> FIM_MID_TEXTS = List.of(
            "<|fim_middle|>",
            "<fim-middle>",
            "<fim_middle>",
            "<｜fim▁end｜>",
            "<MID>",
            "▁<MID>",
            "<|code_middle|>",
            "<|middle|>");
    private static final List<String> FIM_PAD_TEXTS =
            List.of("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]");
    private static final List<String> FIM_REP_TEXTS =
            List.of("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>");
    private static final List<String> FIM_SEP_TEXTS = List.of("<|file_sep|>");
    /** Tokens that end generation by their text alone. */
    private static final Set<String> EOG_TEXTS = Set.of(
            "<|eot_id|>",
            "<|im_end|>",
            "<|end|>",
            "<|return|>",
            "<|call|>",
            "<|flush|>",
            "<|calls|>",
            "<end_of_turn>",
            "<|endoftext|>",
            "</s>",
            "<|eom_id|>",
            "<EOT>",
            "_<EOT>",
            "[EOT]",
            "[EOS]",
            "<|end_of_text|>",
            "<end_of_utterance>",
            "<eos>",
            "<turn|>",
            "<|tool_response>",
            "<｜end▁of▁sentence｜>",
            "[e~[");

    private TokenizerLoader() {}

    static Tokenizer load(GgufMetadata md) {
        String model = md.optString(MODEL_KEY)
                .orElseThrow(() -> new InvalidInputException(
                        "the model has no tokenizer (metadata key " + MODEL_KEY + " is missing)"));
        if (!model.equals("gpt2")) {
            throw new InvalidInputException("unsupported tokenizer '" + model + "' in " + MODEL_KEY
                    + " (only byte-level BPE, 'gpt2', is supported)");
        }
        String pre = md.optString(PRE_KEY).orElse("");
        if (!GLM4_PRE.contains(pre)) {
            throw new InvalidInputException(
                    "unsupported pre-tokenizer '" + pre + "' in " + PRE_KEY + " (supported: glm4, chatglm-bpe)");
        }

        String[] texts = md.stringArray(TOKENS_KEY).clone();
        int n = texts.length;
        TokenType[] types = readTypes(md, n);
        Map<String, Integer> ids = new HashMap<>(n * 2);
        for (int id = 0; id < n; id++) {
            if (texts[id].isEmpty()) {
                texts[id] = "[EMPTY_" + id + "]"; // llama.cpp's stand-in, so every token has a text
            }
            Integer previous = ids.putIfAbsent(texts[id], id);
            if (previous != null) {
                throw new InvalidInputException("duplicate token in " + TOKENS_KEY + ": '" + texts[id] + "' has ids "
                        + previous + " and " + id);
            }
        }

        SpecialTokens special = resolveSpecialTokens(md, texts, types, ids);
        BpeEncoder bpe = buildBpe(md.stringArray(MERGES_KEY), texts, ids);
        return new Tokenizer(texts, types, java.util.Collections.unmodifiableMap(ids), special, bpe);
    }

    private static TokenType[] readTypes(GgufMetadata md, int n) {
        TokenType[] types = new TokenType[n];
        if (!md.has(TYPES_KEY)) {
            java.util.Arrays.fill(types, TokenType.NORMAL);
            return types;
        }
        long[] raw = md.integerArray(TYPES_KEY);
        if (raw.length < n) {
            throw new InvalidInputException(TYPES_KEY + " has " + raw.length + " entries for " + n + " tokens");
        }
        for (int i = 0; i < n; i++) {
            types[i] = TokenType.fromGgufId(raw[i]);
        }
        return types;
    }

    /**
     * Symbols are token ids; a byte or merge result that is not a vocabulary entry gets a virtual id
     * above the vocabulary (see {@link BpeEncoder}).
     */
    private static BpeEncoder buildBpe(String[] merges, String[] texts, Map<String, Integer> ids) {
        int n = texts.length;
        Symbols symbols = new Symbols(ids, n);
        int[] byteSymbol = new int[256];
        for (int b = 0; b < 256; b++) {
            byteSymbol[b] = symbols.idOf(String.valueOf(ByteLevel.charOf(b)));
        }
        // Every merge's result is a possible symbol; a merge whose parts can never occur is kept inert.
        int[] merged = new int[merges.length];
        String[] lefts = new String[merges.length];
        String[] rights = new String[merges.length];
        for (int rank = 0; rank < merges.length; rank++) {
            String line = merges[rank];
            int space = line.indexOf(' ', 1); // the first space after the first character separates the parts
            lefts[rank] = space < 0 ? "" : line.substring(0, space);
            rights[rank] = space < 0 ? "" : line.substring(space + 1);
            merged[rank] = symbols.idOf(space < 0 ? "" : line.substring(0, space) + line.substring(space + 1));
        }
        int[] leftIds = new int[merges.length];
        int[] rightIds = new int[merges.length];
        for (int rank = 0; rank < merges.length; rank++) {
            leftIds[rank] = symbols.existingId(lefts[rank]);
            rightIds[rank] = symbols.existingId(rights[rank]);
        }
        // A virtual symbol that survives merging is emitted character by character, keeping only
        // characters that are single-byte tokens (what llama.cpp's per-byte lookup finds).
        int[][] fallback = new int[symbols.virtualTexts.size()][];
        for (int v = 0; v < fallback.length; v++) {
            fallback[v] = symbols.virtualTexts
                    .get(v)
                    .chars()
                    .filter(c -> c < 0x80 && ids.containsKey(String.valueOf((char) c)))
                    .map(c -> ids.get(String.valueOf((char) c)))
                    .toArray();
        }
        return new BpeEncoder(new MergeTable(leftIds, rightIds, merged), byteSymbol, n, fallback);
    }

    /** Symbol ids for BPE: vocabulary ids, then virtual ids for texts that are not vocabulary entries. */
    private static final class Symbols {
        final Map<String, Integer> vocabulary;
        final int vocabularySize;
        final Map<String, Integer> virtualIds = new HashMap<>();
        final List<String> virtualTexts = new ArrayList<>();

        Symbols(Map<String, Integer> vocabulary, int vocabularySize) {
            this.vocabulary = vocabulary;
            this.vocabularySize = vocabularySize;
        }

        /** The id of a text, giving it a virtual id if it has none yet. */
        int idOf(String text) {
            int id = existingId(text);
            if (id >= 0) {
                return id;
            }
            virtualTexts.add(text);
            int virtual = vocabularySize + virtualTexts.size() - 1;
            virtualIds.put(text, virtual);
            return virtual;
        }

        /** The id of a text, or -1 if no symbol can have this text. */
        int existingId(String text) {
            Integer id = vocabulary.get(text);
            if (id == null) {
                id = virtualIds.get(text);
            }
            return id == null ? -1 : id;
        }
    }

    private static SpecialTokens resolveSpecialTokens(
            GgufMetadata md, String[] texts, TokenType[] types, Map<String, Integer> ids) {
        int n = texts.length;
        // Without keys, llama.cpp's BPE defaults are bos = eos = 11, but the GLM-4 pre-tokenizer drops bos.
        int bos = key(md, "tokenizer.ggml.bos_token_id", SpecialTokens.NONE, n);
        int eos = key(md, "tokenizer.ggml.eos_token_id", 11, n);
        int pad = key(md, "tokenizer.ggml.padding_token_id", SpecialTokens.NONE, n);
        int unk = key(md, "tokenizer.ggml.unknown_token_id", SpecialTokens.NONE, n);
        int eot = keyOrText(md, "tokenizer.ggml.eot_token_id", EOT_TEXTS, n, ids, types);
        int eom = keyOrText(md, "tokenizer.ggml.eom_token_id", EOM_TEXTS, n, ids, types);
        // Fill-in-the-middle tokens matter here only through their side effects: found by text they
        // become control tokens, and pad/repo/sep end generation.
        keyOrText(md, "tokenizer.ggml.fim_pre_token_id", FIM_PRE_TEXTS, n, ids, types);
        keyOrText(md, "tokenizer.ggml.fim_suf_token_id", FIM_SUF_TEXTS, n, ids, types);
        keyOrText(md, "tokenizer.ggml.fim_mid_token_id", FIM_MID_TEXTS, n, ids, types);
        int fimPad = keyOrText(md, "tokenizer.ggml.fim_pad_token_id", FIM_PAD_TEXTS, n, ids, types);
        int fimRep = keyOrText(md, "tokenizer.ggml.fim_rep_token_id", FIM_REP_TEXTS, n, ids, types);
        int fimSep = keyOrText(md, "tokenizer.ggml.fim_sep_token_id", FIM_SEP_TEXTS, n, ids, types);

        boolean addBos = md.optBool("tokenizer.ggml.add_bos_token").orElse(false);
        boolean addEos = md.optBool("tokenizer.ggml.add_eos_token").orElse(false);
        if (addBos && bos == SpecialTokens.NONE) {
            throw new InvalidInputException("tokenizer.ggml.add_bos_token is true but the model has no bos token");
        }
        if (addEos && eos == SpecialTokens.NONE) {
            throw new InvalidInputException("tokenizer.ggml.add_eos_token is true but the model has no eos token");
        }

        Set<Integer> eog = new TreeSet<>();
        for (int id = 0; id < n; id++) {
            if (EOG_TEXTS.contains(texts[id])) {
                eog.add(id);
                types[id] = TokenType.CONTROL;
            }
        }
        for (int id : new int[] {fimPad, fimRep, fimSep, eos, eot, eom}) {
            if (id != SpecialTokens.NONE) {
                eog.add(id);
            }
        }
        return new SpecialTokens(bos, eos, eot, eom, pad, unk, new TreeSet<>(eog), addBos, addEos);
    }

    /**
     * The id from a metadata key; without the key, the default (dropped if outside the vocabulary);
     * an id outside the vocabulary in the key is ignored, as llama.cpp ignores it.
     */
    private static int key(GgufMetadata md, String key, int defaultId, int n) {
        int id = defaultId >= n ? SpecialTokens.NONE : defaultId;
        if (md.has(key)) {
            long v = md.integer(key);
            if (v >= 0 && v < n) {
                id = (int) v;
            }
        }
        return id;
    }

    /**
     * The id from a metadata key, else the lowest id whose text is one of the candidates (llama.cpp
     * takes whichever its hash map yields first); a token found by text is made a control token.
     */
    private static int keyOrText(
            GgufMetadata md, String key, List<String> candidates, int n, Map<String, Integer> ids, TokenType[] types) {
        int id = key(md, key, SpecialTokens.NONE, n);
        if (id != SpecialTokens.NONE) {
            return id;
        }
        for (String text : candidates) {
            Integer found = ids.get(text);
            if (found != null && (id == SpecialTokens.NONE || found < id)) {
                id = found;
            }
        }
        if (id != SpecialTokens.NONE) {
            types[id] = TokenType.CONTROL;
        }
        return id;
    }
}
