package dev.glimmer.engine.generate;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.backend.SequencePool;
import java.util.List;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;

/**
 * Generates a completion of one sequence of a {@link SequencePool}, on whatever backend the pool runs: prefill the
 * prompt in chunks, then decode one token at a time until an end-of-generation token, a stop string, the token limit
 * or a full context ({@link Decoding}). Cancellation is checked between prompt chunks and between tokens; each token
 * is reported as it is produced.
 *
 * <p>The prompt is processed after what the sequence already holds, so a caller that keeps a conversation's
 * sequence passes only the new tokens (after {@link SequencePool.Sequence#truncate} to the shared prefix).
 */
public final class Generator {
    private final SequencePool pool;
    private final SequencePool.Sequence sequence;
    private final Vocabulary vocabulary;
    private final int vocabSize;
    /** Prompt tokens per chunk: a cancellation is noticed within one. */
    private final int promptChunk;

    public Generator(
            SequencePool pool, SequencePool.Sequence sequence, Vocabulary vocabulary, int vocabSize, int promptChunk) {
        this.promptChunk = promptChunk;
        this.pool = pool;
        this.sequence = sequence;
        this.vocabulary = vocabulary;
        this.vocabSize = vocabSize;
    }

    /**
     * Runs {@code request}, sending every token to {@code onToken}.
     *
     * @param cancelled polled between prompt chunks and between tokens; true ends the generation (CANCELLED)
     * @throws InvalidInputException when the prompt does not fit in the context
     */
    public GenerationResult generate(
            GenerationRequest request, Consumer<TokenEvent> onToken, BooleanSupplier cancelled) {
        int[] prompt = request.prompt();
        if (prompt.length > remaining()) {
            throw new InvalidInputException("the prompt has " + prompt.length + " tokens but the context has room for "
                    + remaining() + " (context size " + sequence.capacity() + ")");
        }
        long start = System.nanoTime();

        // Prefill, chunk by chunk, so a cancellation is noticed within one chunk.
        SequencePool.Next next = null;
        for (int done = 0; done < prompt.length; done += promptChunk) {
            if (cancelled.getAsBoolean()) {
                return new GenerationResult(
                        "", new int[0], FinishReason.CANCELLED, new Timings(done, millisSince(start), 0, 0));
            }
            int n = Math.min(promptChunk, prompt.length - done);
            next = pool.prompt(sequence, prompt, done, n, SequencePool.Readout.LOGITS);
        }
        double promptMillis = millisSince(start);
        long decodeStart = System.nanoTime();

        Decoding decoding = new Decoding(
                vocabulary,
                vocabSize,
                request.sampling(),
                prompt,
                request.stop(),
                request.maxTokens(),
                remaining(),
                true,
                0,
                null);
        StringBuilder text = new StringBuilder();
        FinishReason finish;
        while (true) {
            if (cancelled.getAsBoolean()) {
                finish = FinishReason.CANCELLED;
                break;
            }
            Decoding.Step step = decoding.next(next.logits(), next.greedyToken(), remaining());
            text.append(step.text());
            onToken.accept(
                    new TokenEvent(step.token(), step.text(), step.logprobs().logprob()));
            if (step.finish() != null) {
                finish = step.finish();
                break;
            }
            next = pool.step(List.of(sequence), new int[] {step.token()}, new SequencePool.Readout[] {decoding.readout()
            })[0];
        }
        return new GenerationResult(
                text.toString(),
                decoding.tokens(),
                finish,
                new Timings(prompt.length, promptMillis, decoding.count(), millisSince(decodeStart)));
    }

    private int remaining() {
        return sequence.capacity() - sequence.position();
    }

    private static double millisSince(long startNanos) {
        return (System.nanoTime() - startNanos) / 1e6;
    }
}
