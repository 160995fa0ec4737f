package dev.glimmer.engine.chat;

/**
 * Python's {@code str.strip()} as the chat template uses it. Python strips every character for
 * which {@code str.isspace()} holds, a different set from Java's {@link String#strip()} (Python
 * also strips U+0085, U+00A0, U+2007 and U+202F, for example), so the template's results can only
 * be reproduced with Python's set.
 */
final class PythonText {

    /** The characters for which Python's {@code str.isspace()} is true (Python 3, Unicode 15). */
    static boolean isSpace(char c) {
        return switch (c) {
            case '\t',
                    '\n',
                    '\u000b',
                    '\f',
                    '\r',
                    '\u001c',
                    '\u001d',
                    '\u001e',
                    '\u001f',
                    ' ',
                    '\u0085',
                    '\u00a0',
                    '\u1680',
                    '\u2028',
                    '\u2029',
                    '\u202f',
                    '\u205f',
                    '\u3000' -> true;
            default -> c >= '\u2000' && c <= '\u200a';
        };
    }

    static String strip(String text) {
        int start = 0;
        int end = text.length();
        while (start < end && isSpace(text.charAt(start))) {
            start++;
        }
        while (end > start && isSpace(text.charAt(end - 1))) {
            end--;
        }
        return text.substring(start, end);
    }

    /** {@code text.lstrip('\n')}. */
    static String stripLeadingNewlines(String text) {
        int start = 0;
        while (start < text.length() && text.charAt(start) == '\n') {
            start++;
        }
        return text.substring(start);
    }

    /** {@code text.rstrip('\n')}. */
    static String stripTrailingNewlines(String text) {
        int end = text.length();
        while (end > 0 && text.charAt(end - 1) == '\n') {
            end--;
        }
        return text.substring(0, end);
    }

    private PythonText() {}
}
