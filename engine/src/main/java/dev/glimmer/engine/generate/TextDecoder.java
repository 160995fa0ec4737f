package dev.glimmer.engine.generate;

/** Turns generated token ids into text as they come, holding back incomplete UTF-8 sequences. */
public interface TextDecoder {

    /** The text that token {@code id} completes (possibly empty). */
    String next(int id);

    /** Whatever is still held back, at the end of the sequence. */
    String finish();
}
