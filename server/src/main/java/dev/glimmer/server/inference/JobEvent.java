package dev.glimmer.server.inference;

import dev.glimmer.engine.generate.FinishReason;
import dev.glimmer.engine.sampling.TokenLogprobs;

/** What the scheduler reports about one job, in order, through the job's event queue. */
public sealed interface JobEvent {

    /**
     * The job has its slot and KV cache and its prompt's computing begins: the first event of every job that
     * starts. The cached share of the prompt is known from here on (the Anthropic stream's {@code message_start}
     * reports it); it includes a prefix that a job admitted with it computed meanwhile.
     *
     * @param promptTokens the prompt's tokens in all
     * @param cachedTokens of which come from a cached KV prefix and are not processed again
     */
    record Admitted(int promptTokens, int cachedTokens) implements JobEvent {}

    /** A chunk of the prompt was processed and more remain (handlers ping the client, which notices a gone client). */
    record PromptProgress(int processed, int total) implements JobEvent {}

    /**
     * One generated token.
     *
     * @param token    the token id
     * @param text     the text that becomes visible with it (empty while a UTF-8 sequence or a possible
     *                 stop string is incomplete; may include text held back earlier)
     * @param logprobs its log-probability and the top alternatives, or null when not asked for
     */
    record Token(int token, String text, TokenLogprobs logprobs) implements JobEvent {}

    /**
     * The end of the job.
     *
     * @param reason           why it ended
     * @param promptTokens     prompt tokens in all
     * @param cachedTokens     of which came from a cached KV prefix
     * @param generatedTokens  tokens generated
     * @param promptMillis     time spent processing the uncached prompt tokens
     * @param generationMillis time from the first logits to the end
     * @param stopString       the request's stop string that ended it, or null when none did
     * @param draftedTokens    tokens drafted by speculative steps (docs/SPECULATIVE.md), 0 without
     * @param acceptedTokens   of which were accepted: generated tokens that cost no step of their own
     */
    record Finished(
            FinishReason reason,
            int promptTokens,
            int cachedTokens,
            int generatedTokens,
            double promptMillis,
            double generationMillis,
            String stopString,
            int draftedTokens,
            int acceptedTokens)
            implements JobEvent {}

    /**
     * The job could not run or went wrong; {@code message} is for the client.
     *
     * @param retryable true when the server is shutting down (a 503), false for a fault of the server (a 500)
     */
    record Failed(String message, boolean retryable) implements JobEvent {}
}
