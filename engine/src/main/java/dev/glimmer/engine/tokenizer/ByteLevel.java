package dev.glimmer.engine.tokenizer;

/**
 * The byte-level alphabet of GPT-2 style BPE: every byte value is written as one printable Unicode
 * character, so that any byte string is a string of "visible" characters and the vocabulary can be
 * stored as text. Printable Latin-1 bytes ({@code !..~}, {@code ¡..¬}, {@code ®..ÿ}) stand for
 * themselves; the other 68 bytes are given the characters U+0100, U+0101, ... in byte order.
 */
final class ByteLevel {
    private static final char[] BYTE_TO_CHAR = new char[256];
    private static final short[] CHAR_TO_BYTE = new short[0x100 + 68];

    static {
        java.util.Arrays.fill(CHAR_TO_BYTE, (short) -1);
        int next = 0x100;
        for (int b = 0; b < 256; b++) {
            boolean printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            char c = printable ? (char) b : (char) next++;
            BYTE_TO_CHAR[b] = c;
            CHAR_TO_BYTE[c] = (short) b;
        }
    }

    /** The character that stands for byte {@code b} (0..255). */
    static char charOf(int b) {
        return BYTE_TO_CHAR[b & 0xFF];
    }

    /** The byte a character stands for, or -1 if it is not part of the alphabet. */
    static int byteOf(int codepoint) {
        return codepoint >= 0 && codepoint < CHAR_TO_BYTE.length ? CHAR_TO_BYTE[codepoint] : -1;
    }

    private ByteLevel() {}
}
