package dev.glimmer.server.loadgen;

/**
 * What one streamed completion gave, with {@link System#nanoTime} times.
 *
 * @param sentNanos    when the request was sent
 * @param endNanos     when its last line arrived (or when it failed)
 * @param contentNanos when each event carrying generated text arrived, in order
 * @param promptTokens the server's {@code usage.prompt_tokens}; -1 when it sent none
 * @param outputTokens the server's {@code usage.completion_tokens}; -1 when it sent none
 * @param error        why the request failed, on one line; null when it did not
 */
record RequestResult(
        long sentNanos, long endNanos, long[] contentNanos, int promptTokens, int outputTokens, String error) {

    static RequestResult failed(long sentNanos, String error) {
        return new RequestResult(sentNanos, System.nanoTime(), new long[0], -1, -1, error);
    }

    boolean ok() {
        return error == null;
    }

    boolean reportedUsage() {
        return promptTokens >= 0 && outputTokens >= 0;
    }

    /** The generated tokens: the server's count, or else the events with text (usually one token each). */
    int generatedTokens() {
        return outputTokens >= 0 ? outputTokens : contentNanos.length;
    }
}
