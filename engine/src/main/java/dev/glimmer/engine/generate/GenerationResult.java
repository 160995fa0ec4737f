package dev.glimmer.engine.generate;

/**
 * The outcome of a generation.
 *
 * @param text    the generated text, without a matched stop string or end-of-generation token
 * @param tokens  the generated token ids (an end-of-generation token included)
 * @param finish  why it ended
 * @param timings how long it took
 */
public record GenerationResult(String text, int[] tokens, FinishReason finish, Timings timings) {}
