package dev.glimmer.engine.generate;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.sampling.Sampler;
import dev.glimmer.engine.sampling.TokenLogprobs;

import java.util.Arrays;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;

/**
 * Generates a completion of one sequence: prefill the prompt in chunks, then decode one token at a
 * time until an end-of-generation token, a stop string, the token limit or a full context.
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
        Sampler sampler = new Sampler(request.sampling(), vocabSize);
        for (int token : prompt) {
            sampler.accept(token);
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

        TextDecoder decoder = vocabulary.newDecoder();
        StopStrings stops = new StopStrings(request.stop());
        StringBuilder text = new StringBuilder();
        int[] tokens = new int[Math.min(request.maxTokens(), cache.remaining() + 1)];
        int generated = 0;
        FinishReason finish;
        while (true) {
            if (cancelled.getAsBoolean()) {
                finish = FinishReason.CANCELLED;
                break;
            }
            int token = sampler.sample(logits);
            sampler.accept(token);
            float logprob = TokenLogprobs.of(logits, vocabSize, token, 0).logprob();
            tokens[generated++] = token;
            if (vocabulary.isEndOfGeneration(token)) {
                String rest = stops.push(decoder.finish()) + stops.flush();
                text.append(rest);
                onToken.accept(new TokenEvent(token, rest, logprob));
                finish = FinishReason.STOP;
                break;
            }
            String visible = stops.push(decoder.next(token));
            if (stops.matched()) {
                text.append(visible);
                onToken.accept(new TokenEvent(token, visible, logprob));
                finish = FinishReason.STOP;
                break;
            }
            boolean full = generated == request.maxTokens() || cache.remaining() == 0;
            if (full) {
                // The last token: release whatever is held back (no stop string can complete any more).
                visible += stops.push(decoder.finish());
                visible += stops.matched() ? "" : stops.flush();
            }
            text.append(visible);
            onToken.accept(new TokenEvent(token, visible, logprob));
            if (stops.matched()) {
                finish = FinishReason.STOP;
                break;
            }
            if (full) {
                finish = FinishReason.LENGTH;
                break;
            }
            logits = forward.forward(cache, tokens, generated - 1, 1, false);
        }
        return new GenerationResult(text.toString(), Arrays.copyOf(tokens, generated), finish,
                new Timings(prompt.length, promptMillis, generated, millisSince(decodeStart)));
    }

    private static double millisSince(long startNanos) {
        return (System.nanoTime() - startNanos) / 1e6;
    }
}
