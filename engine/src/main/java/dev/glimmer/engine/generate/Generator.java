package dev.glimmer.engine.generate;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.model.GlmForward;

import java.util.function.BooleanSupplier;
import java.util.function.Consumer;

/**
 * Generates a completion of one sequence: prefill the prompt in chunks, then decode one token at a
 * time until an end-of-generation token, a stop string, the token limit or a full context ({@link Decoding}).
 * Cancellation is checked between prompt chunks and between tokens; each token is reported as it
 * is produced.
 *
 * <p>The prompt is processed after what {@code cache} already holds, so a caller that keeps a
 * conversation's cache passes only the new tokens (after {@link KvCache#truncate} to the shared prefix).
 */
public final class Generator {
    private final GlmForward forward;
    private final KvCache cache;
    private final Vocabulary vocabulary;
    private final int vocabSize;

    public Generator(GlmForward forward, KvCache cache, Vocabulary vocabulary, int vocabSize) {
        this.forward = forward;
        this.cache = cache;
        this.vocabulary = vocabulary;
        this.vocabSize = vocabSize;
    }

    /**
     * Runs {@code request}, sending every token to {@code onToken}.
     *
     * @param cancelled polled between prompt chunks and between tokens; true ends the generation (CANCELLED)
     * @throws InvalidInputException when the prompt does not fit in the context
     */
    public GenerationResult generate(GenerationRequest request, Consumer<TokenEvent> onToken, BooleanSupplier cancelled) {
        int[] prompt = request.prompt();
        if (prompt.length > cache.remaining()) {
            throw new InvalidInputException("the prompt has " + prompt.length + " tokens but the context has room for "
                    + cache.remaining() + " (context size " + cache.capacity() + ")");
        }
        long start = System.nanoTime();

        // Prefill, chunk by chunk, so a cancellation is noticed within one chunk.
        float[] logits = null;
        for (int done = 0; done < prompt.length; done += forward.maxBatch()) {
            if (cancelled.getAsBoolean()) {
                return new GenerationResult("", new int[0], FinishReason.CANCELLED,
                        new Timings(done, millisSince(start), 0, 0));
            }
            int n = Math.min(forward.maxBatch(), prompt.length - done);
            logits = forward.forward(cache, prompt, done, n, false);
        }
        double promptMillis = millisSince(start);
        long decodeStart = System.nanoTime();

        Decoding decoding = new Decoding(vocabulary, vocabSize, request.sampling(), prompt, request.stop(),
                request.maxTokens(), cache.remaining(), true, 0, null);
        StringBuilder text = new StringBuilder();
        FinishReason finish;
        while (true) {
            if (cancelled.getAsBoolean()) {
                finish = FinishReason.CANCELLED;
                break;
            }
            Decoding.Step step = decoding.next(logits, -1, cache.remaining());
            text.append(step.text());
            onToken.accept(new TokenEvent(step.token(), step.text(), step.logprobs().logprob()));
            if (step.finish() != null) {
                finish = step.finish();
                break;
            }
            logits = forward.forward(cache, new int[] {step.token()}, 0, 1, false);
        }
        return new GenerationResult(text.toString(), decoding.tokens(), finish,
                new Timings(prompt.length, promptMillis, decoding.count(), millisSince(decodeStart)));
    }

    private static double millisSince(long startNanos) {
        return (System.nanoTime() - startNanos) / 1e6;
    }
}
