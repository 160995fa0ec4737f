package dev.glimmer.engine.tokenizer;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * Turns generated tokens into text as they arrive. A token may end in the middle of a multi-byte
 * UTF-8 character (byte-level BPE splits characters freely), so the bytes of an incomplete character
 * are held back until the tokens that complete it arrive; {@link #finish()} releases whatever is
 * left. Bytes that can never form a character are emitted as U+FFFD, never held forever.
 *
 * <p>Not thread-safe: one instance per generated stream.
 */
public final class StreamingDetokenizer {
    private final Tokenizer tokenizer;
    private final boolean renderControl;
    private byte[] pending = new byte[16];
    private int pendingLength;

    StreamingDetokenizer(Tokenizer tokenizer, boolean renderControl) {
        this.tokenizer = tokenizer;
        this.renderControl = renderControl;
    }

    /**
     * Adds one token and returns the text that is now complete (possibly empty).
     *
     * @throws dev.glimmer.engine.InvalidInputException if the id is not in the vocabulary
     */
    public String next(int id) {
        byte[] piece = tokenizer.piece(id, renderControl);
        if (pendingLength + piece.length > pending.length) {
            pending = Arrays.copyOf(pending, Math.max(pending.length * 2, pendingLength + piece.length));
        }
        System.arraycopy(piece, 0, pending, pendingLength, piece.length);
        pendingLength += piece.length;
        int complete = pendingLength - Utf8.incompleteTail(pending, pendingLength);
        return take(complete);
    }

    /** Returns the held-back bytes (an incomplete character becomes U+FFFD) and empties the buffer. */
    public String finish() {
        return take(pendingLength);
    }

    private String take(int length) {
        if (length == 0) {
            return "";
        }
        String text = new String(pending, 0, length, StandardCharsets.UTF_8);
        System.arraycopy(pending, length, pending, 0, pendingLength - length);
        pendingLength -= length;
        return text;
    }
}
