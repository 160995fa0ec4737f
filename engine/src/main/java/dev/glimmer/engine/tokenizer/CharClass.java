package dev.glimmer.engine.tokenizer;

/**
 * The character classes the pre-tokenizer's expression uses, defined as llama.cpp defines them:
 * {@code \p{L}} is the general categories Lu/Ll/Lt/Lm/Lo, {@code \p{N}} is Nd/Nl/No, and {@code \s}
 * is the Unicode White_Space property (25 code points; unlike Java's {@code \s} it includes U+0085,
 * U+00A0 and the other Unicode spaces, and unlike {@link Character#isWhitespace} it excludes
 * U+001C..U+001F). Everything else is "other". Categories come from the JDK's Unicode tables; code
 * points assigned in a newer Unicode version than llama.cpp's tables can therefore classify
 * differently (llama.cpp sees them as unassigned, i.e. "other").
 */
final class CharClass {
    static final byte OTHER = 0;
    static final byte LETTER = 1;
    static final byte NUMBER = 2;
    static final byte WHITESPACE = 3;

    private static final int[] WHITE_SPACE = {
        0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006,
        0x2007, 0x2008, 0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
    };

    /** One class per code point, computed once (1.1 MB) so that the hot loop is a single array read. */
    private static final byte[] TABLE = build();

    private static byte[] build() {
        byte[] table = new byte[Character.MAX_CODE_POINT + 1];
        for (int cp = 0; cp <= Character.MAX_CODE_POINT; cp++) {
            table[cp] = switch (Character.getType(cp)) {
                case Character.UPPERCASE_LETTER,
                        Character.LOWERCASE_LETTER,
                        Character.TITLECASE_LETTER,
                        Character.MODIFIER_LETTER,
                        Character.OTHER_LETTER -> LETTER;
                case Character.DECIMAL_DIGIT_NUMBER, Character.LETTER_NUMBER, Character.OTHER_NUMBER -> NUMBER;
                default -> OTHER;
            };
        }
        for (int cp : WHITE_SPACE) {
            table[cp] = WHITESPACE;
        }
        return table;
    }

    static byte of(int codepoint) {
        return TABLE[codepoint];
    }

    private CharClass() {}
}
