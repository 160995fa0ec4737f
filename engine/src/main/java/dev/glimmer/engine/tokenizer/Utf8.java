package dev.glimmer.engine.tokenizer;

/** UTF-8 helpers: encoding into a caller's buffer (no intermediate arrays) and spotting unfinished characters. */
final class Utf8 {
    private Utf8() {}

    /**
     * Writes the UTF-8 bytes of {@code text[from..to)} to {@code out} (at least 3 bytes per char of
     * room) and returns how many were written. The text must have no unpaired surrogates.
     */
    static int encode(String text, int from, int to, byte[] out) {
        int n = 0;
        for (int i = from; i < to; i++) {
            char c = text.charAt(i);
            if (c < 0x80) {
                out[n++] = (byte) c;
            } else if (c < 0x800) {
                out[n++] = (byte) (0xC0 | (c >> 6));
                out[n++] = (byte) (0x80 | (c & 0x3F));
            } else if (Character.isHighSurrogate(c)) {
                int cp = Character.toCodePoint(c, text.charAt(++i));
                out[n++] = (byte) (0xF0 | (cp >> 18));
                out[n++] = (byte) (0x80 | ((cp >> 12) & 0x3F));
                out[n++] = (byte) (0x80 | ((cp >> 6) & 0x3F));
                out[n++] = (byte) (0x80 | (cp & 0x3F));
            } else {
                out[n++] = (byte) (0xE0 | (c >> 12));
                out[n++] = (byte) (0x80 | ((c >> 6) & 0x3F));
                out[n++] = (byte) (0x80 | (c & 0x3F));
            }
        }
        return n;
    }

    /**
     * How many bytes at the end of {@code bytes[0..length)} are the start of a UTF-8 sequence that is
     * not complete yet (0 to 3): a lead byte followed by fewer continuation bytes than it announces.
     */
    static int incompleteTail(byte[] bytes, int length) {
        for (int back = 1; back <= Math.min(3, length); back++) {
            int b = bytes[length - back] & 0xFF;
            if ((b & 0xC0) == 0x80) {
                continue; // continuation byte: keep looking for the lead
            }
            int expected = b >= 0xF0 && b <= 0xF4 ? 4 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xC2 && b <= 0xDF ? 2 : 1;
            return expected > back ? back : 0;
        }
        return 0;
    }
}
