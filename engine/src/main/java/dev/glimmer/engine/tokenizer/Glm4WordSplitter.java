package dev.glimmer.engine.tokenizer;

/**
 * Splits text into the words that BPE merges within, exactly as the {@code glm4} pre-tokenizer
 * expression does (llama.cpp evaluates it with the same hand-written matcher it uses for Llama 3):
 * <pre>
 * (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
 *   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * </pre>
 * The alternatives are tried in order at each position, like a regex engine would, but directly on
 * the string's code points with {@link CharClass} and without backtracking, which is what makes
 * encoding fast. Positions are UTF-16 indices that never fall inside a surrogate pair.
 */
final class Glm4WordSplitter {

    /** Class of a position outside the text: matches neither letter, number, whitespace nor "other". */
    private static final byte OUTSIDE = -1;

    private Glm4WordSplitter() {}

    private static byte classAt(String s, int pos, int end) {
        return pos < end ? CharClass.of(s.codePointAt(pos)) : OUTSIDE;
    }

    /** The index after the code point at {@code pos}. */
    private static int next(String s, int pos) {
        return pos + Character.charCount(s.codePointAt(pos));
    }

    private static boolean isLineBreak(int c) {
        return c == '\r' || c == '\n';
    }

    /**
     * The end of the word that starts at {@code pos} in {@code s[.., end)}; always greater than
     * {@code pos}. Words are found one after the other: the next starts where this one ends.
     */
    static int wordEnd(String s, int pos, int end) {
        int cp = s.codePointAt(pos);
        byte cls = CharClass.of(cp);
        int after = pos + Character.charCount(cp);

        // '[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]  (only ASCII letters can match)
        if (cp == '\'' && pos + 1 < end) {
            int c1 = asciiLower(s.charAt(pos + 1));
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
                return pos + 2;
            }
            if (pos + 2 < end) {
                int c2 = asciiLower(s.charAt(pos + 2));
                if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
                    return pos + 3;
                }
            }
        }

        // [^\r\n\p{L}\p{N}]?\p{L}+  (one leading non-letter, e.g. a space, may precede the letters)
        if (!isLineBreak(cp)
                && cls != CharClass.NUMBER
                && (cls == CharClass.LETTER || classAt(s, after, end) == CharClass.LETTER)) {
            int wordEnd = after;
            while (classAt(s, wordEnd, end) == CharClass.LETTER) {
                wordEnd = next(s, wordEnd);
            }
            return wordEnd;
        }

        // \p{N}{1,3}
        if (cls == CharClass.NUMBER) {
            int wordEnd = after;
            for (int digits = 1; digits < 3 && classAt(s, wordEnd, end) == CharClass.NUMBER; digits++) {
                wordEnd = next(s, wordEnd);
            }
            return wordEnd;
        }

        // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
        int symbolStart = cp == ' ' ? after : pos;
        if (classAt(s, symbolStart, end) == CharClass.OTHER) {
            int wordEnd = next(s, symbolStart);
            while (classAt(s, wordEnd, end) == CharClass.OTHER) {
                wordEnd = next(s, wordEnd);
            }
            while (wordEnd < end && isLineBreak(s.charAt(wordEnd))) {
                wordEnd++;
            }
            return wordEnd;
        }

        // \s*[\r\n]+ , \s+(?!\S) , \s+   (whitespace code points are all single UTF-16 units)
        int wsEnd = pos;
        int afterLastLineBreak = -1;
        while (classAt(s, wsEnd, end) == CharClass.WHITESPACE) {
            if (isLineBreak(s.charAt(wsEnd))) {
                afterLastLineBreak = wsEnd + 1;
            }
            wsEnd++;
        }
        if (afterLastLineBreak > 0) {
            return afterLastLineBreak;
        }
        int count = wsEnd - pos;
        if (count > 1 && wsEnd < end) {
            // leave the last whitespace to start the next word (" word")
            return wsEnd - 1;
        }
        if (count > 0) {
            return wsEnd;
        }
        return after;
    }

    private static int asciiLower(int c) {
        return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
    }
}
