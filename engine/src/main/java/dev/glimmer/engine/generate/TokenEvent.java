package dev.glimmer.engine.generate;

/**
 * One generated token, as it is produced.
 *
 * @param token   the token id
 * @param text    the text that becomes visible with it: empty while a UTF-8 sequence or a possible stop
 *                string is incomplete, and may include text held back for earlier tokens
 * @param logprob the token's log-probability under the model's raw logits; NaN unless the request asked for it
 */
public record TokenEvent(int token, String text, float logprob) {}
