package dev.glimmer.engine.tokenizer;

import dev.glimmer.engine.gguf.GgufMetadata;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A deliberately simple second implementation of plain-text encoding, for comparison: the glm4
 * expression evaluated by java.util.regex (with \s spelled out as the Unicode White_Space set), and
 * textbook BPE on strings (merge the lowest-ranked adjacent pair, leftmost first, until none is left).
 * Slow, but obviously right by construction.
 */
final class ReferenceEncoder {
    private static final String WS = "\\x{9}-\\x{D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}"
            + "\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";
    static final Pattern GLM4 = Pattern.compile("(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
            + "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
            + "|\\p{N}{1,3}"
            + "| ?[^" + WS + "\\p{L}\\p{N}]+[\\r\\n]*"
            + "|[" + WS + "]*[\\r\\n]+"
            + "|[" + WS + "]+(?![^" + WS + "])"
            + "|[" + WS + "]+");

    private final Map<String, Integer> ranks = new HashMap<>();
    private final Map<String, Integer> ids = new HashMap<>();

    ReferenceEncoder(GgufMetadata md) {
        String[] merges = md.stringArray("tokenizer.ggml.merges");
        for (int i = 0; i < merges.length; i++) {
            ranks.putIfAbsent(merges[i], i);
        }
        String[] tokens = md.stringArray("tokenizer.ggml.tokens");
        for (int i = 0; i < tokens.length; i++) {
            ids.put(tokens[i], i);
        }
    }

    /** The words of a text per the regex (unmatched stretches, if any, are words too). */
    static List<String> words(String text) {
        List<String> words = new ArrayList<>();
        Matcher m = GLM4.matcher(text);
        int last = 0;
        while (m.find()) {
            if (m.start() > last) {
                words.add(text.substring(last, m.start()));
            }
            words.add(m.group());
            last = m.end();
        }
        if (last < text.length()) {
            words.add(text.substring(last));
        }
        return words;
    }

    int[] encode(String text) {
        List<Integer> out = new ArrayList<>();
        for (String word : words(text)) {
            List<String> symbols = new ArrayList<>();
            for (byte b : word.getBytes(StandardCharsets.UTF_8)) {
                symbols.add(String.valueOf(ByteLevel.charOf(b)));
            }
            while (true) {
                int best = -1;
                int bestRank = Integer.MAX_VALUE;
                for (int i = 0; i + 1 < symbols.size(); i++) {
                    Integer r = ranks.get(symbols.get(i) + " " + symbols.get(i + 1));
                    if (r != null && r < bestRank) {
                        bestRank = r;
                        best = i;
                    }
                }
                if (best < 0) {
                    break;
                }
                symbols.set(best, symbols.get(best) + symbols.remove(best + 1));
            }
            for (String s : symbols) {
                out.add(ids.get(s));
            }
        }
        return out.stream().mapToInt(Integer::intValue).toArray();
    }
}
