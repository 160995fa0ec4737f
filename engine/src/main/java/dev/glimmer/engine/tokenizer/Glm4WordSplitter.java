package dev.glimmer.engine.tokenizer;

/**
 * Splits text into the words that BPE merges within, exactly as the {@code glm4} pre-tokenizer
 * expression does (llama.cpp evaluates it with the same hand-written matcher it uses for Llama 3):
 * <pre>
 * (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
 *   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * </pre>
 * The alternatives are tried in order at each position, like a regex engine would, but on an array of
 * code points with {@link CharClass} and without backtracking, which is what makes encoding fast.
 */
final class Glm4WordSplitter {

    /** Class of a position outside the text: matches neither letter, number, whitespace nor "other". */
    private static final byte OUTSIDE = -1;

    private Glm4WordSplitter() {
    }

    /**
     * Appends to {@code ends} the end index of every word of {@code cps[0..length)}, in order (each
     * word starts where the previous one ended; the last end is {@code length}).
     */
    static void split(int[] cps, int length, IntList ends) {
        int pos = 0;
        while (pos < length) {
            pos = wordEnd(cps, length, pos);
            ends.add(pos);
        }
    }

    private static byte classAt(int[] cps, int length, int pos) {
        return pos < length ? CharClass.of(cps[pos]) : OUTSIDE;
    }

    private static boolean isLineBreak(int cp) {
        return cp == '\r' || cp == '\n';
    }

    /** The end of the word that starts at {@code pos} (always greater than {@code pos}). */
    private static int wordEnd(int[] cps, int length, int pos) {
        int cp = cps[pos];
        byte cls = CharClass.of(cp);

        // '[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]
        if (cp == '\'' && pos + 1 < length) {
            int c1 = asciiLower(cps[pos + 1]);
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
                return pos + 2;
            }
            if (pos + 2 < length) {
                int c2 = asciiLower(cps[pos + 2]);
                if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
                    return pos + 3;
                }
            }
        }

        // [^\r\n\p{L}\p{N}]?\p{L}+  (one leading non-letter, e.g. a space, may precede the letters)
        if (!isLineBreak(cp) && cls != CharClass.NUMBER
                && (cls == CharClass.LETTER || classAt(cps, length, pos + 1) == CharClass.LETTER)) {
            int end = pos + 1;
            while (classAt(cps, length, end) == CharClass.LETTER) {
                end++;
            }
            return end;
        }

        // \p{N}{1,3}
        if (cls == CharClass.NUMBER) {
            int end = pos + 1;
            while (end - pos < 3 && classAt(cps, length, end) == CharClass.NUMBER) {
                end++;
            }
            return end;
        }

        // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
        int symbolStart = cp == ' ' ? pos + 1 : pos;
        if (classAt(cps, length, symbolStart) == CharClass.OTHER) {
            int end = symbolStart + 1;
            while (classAt(cps, length, end) == CharClass.OTHER) {
                end++;
            }
            while (end < length && isLineBreak(cps[end])) {
                end++;
            }
            return end;
        }

        // \s*[\r\n]+ , \s+(?!\S) , \s+
        int wsEnd = pos;
        int afterLastLineBreak = -1;
        while (classAt(cps, length, wsEnd) == CharClass.WHITESPACE) {
            if (isLineBreak(cps[wsEnd])) {
                afterLastLineBreak = wsEnd + 1;
            }
            wsEnd++;
        }
        if (afterLastLineBreak > 0) {
            return afterLastLineBreak;
        }
        int count = wsEnd - pos;
        if (count > 1 && wsEnd < length) {
            // leave the last whitespace to start the next word (" word")
            return wsEnd - 1;
        }
        if (count > 0) {
            return wsEnd;
        }
        return pos + 1;
    }

    private static int asciiLower(int cp) {
        return cp >= 'A' && cp <= 'Z' ? cp + ('a' - 'A') : cp;
    }
}
