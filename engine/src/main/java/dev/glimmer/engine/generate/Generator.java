package dev.glimmer.engine.generate;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.backend.SequencePool;
import java.util.List;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;

/**
 * Generates a completion of one sequence of a {@link SequencePool}, on whatever backend the pool runs: prefill the
 * prompt in chunks, then decode one token at a time ({@link SequencePool#decode}: on a GPU a greedy request's steps
 * are chained on the device) until an end-of-generation token, a stop string, the token limit or a full context
 * ({@link Decoding}). Cancellation is checked between prompt chunks and between tokens; each token
 * is reported as it is produced.
 *
 * <p>With drafts ({@link SequencePool#maxDrafts} of a pool made for them), a decode step is a speculative step of
 * the token and up to that many drafted tokens, verified by {@link Decoding#verify}: the same tokens, often more than
 * one per step; with {@link Drafting.Use#WHILE_PAYING}, plain steps run instead while drafting does not pay
 * ({@link Drafting}, which the server's scheduler uses too).
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
    /** Tokens each decode step drafts; 0: plain decode steps. */
    private final int drafts;

    private final SequencePool.DraftFilter draftFilter;
    private final Drafting.Use draftUse;

    public Generator(
            SequencePool pool, SequencePool.Sequence sequence, Vocabulary vocabulary, int vocabSize, int promptChunk) {
        this(pool, sequence, vocabulary, vocabSize, promptChunk, 0, SequencePool.DraftFilter.NONE, Drafting.Use.ALWAYS);
    }

    /**
     * @param drafts      tokens each decode step drafts (at most the pool's {@link SequencePool#maxDrafts}); 0: none
     * @param draftFilter changes the drafts before they are verified ({@code bench --draft-accept}); NONE otherwise
     * @param draftUse    whether every step drafts, or only while that pays
     */
    public Generator(
            SequencePool pool,
            SequencePool.Sequence sequence,
            Vocabulary vocabulary,
            int vocabSize,
            int promptChunk,
            int drafts,
            SequencePool.DraftFilter draftFilter,
            Drafting.Use draftUse) {
        if (drafts < 0 || drafts > pool.maxDrafts()) {
            throw new IllegalArgumentException(drafts + " drafts: the pool drafts at most " + pool.maxDrafts());
        }
        this.promptChunk = promptChunk;
        this.pool = pool;
        this.sequence = sequence;
        this.vocabulary = vocabulary;
        this.vocabSize = vocabSize;
        this.drafts = drafts;
        this.draftFilter = draftFilter;
        this.draftUse = draftUse;
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
                request.logprobs(),
                0,
                null);
        StringBuilder text = new StringBuilder();
        FinishReason finish = null;
        GenerationResult.Drafts draftCounts = GenerationResult.Drafts.NONE;
        if (drafts == 0) {
            // Plain decode: the pool's loop (on a GPU a greedy request's steps are chained on the device).
            FinishReason[] finished = {null};
            SequencePool.Picker picker = (row, given) -> {
                if (cancelled.getAsBoolean()) {
                    finished[0] = FinishReason.CANCELLED;
                    return SequencePool.STOP;
                }
                Decoding.Step step = decoding.next(given.logits(), given.greedyToken(), remaining());
                report(step, request, text, onToken);
                finished[0] = step.finish();
                return step.finish() != null ? SequencePool.STOP : step.token();
            };
            int first = picker.pick(0, next);
            if (first != SequencePool.STOP) {
                pool.decode(
                        List.of(sequence), new int[] {first}, new SequencePool.Readout[] {decoding.readout()}, picker);
            }
            finish = finished[0];
        } else {
            // Speculative steps, with plain ones between them while drafting does not pay.
            Drafting drafting = new Drafting(pool, drafts, draftFilter, draftUse, new Drafting.StepCost());
            List<Decoding.Step> picks = null;
            while (finish == null) {
                if (cancelled.getAsBoolean()) {
                    finish = FinishReason.CANCELLED;
                    break;
                }
                if (picks == null) {
                    picks = List.of(decoding.next(next.logits(), next.greedyToken(), remaining()));
                } else if (drafting.draftNext(decoding)) {
                    picks = drafting.step(sequence, picks.getLast().token(), decoding);
                } else {
                    long stepStart = System.nanoTime();
                    int[] token = {picks.getLast().token()};
                    next = pool.step(List.of(sequence), token, new SequencePool.Readout[] {decoding.readout()})[0];
                    picks = List.of(decoding.next(next.logits(), next.greedyToken(), remaining()));
                    drafting.plainStep(System.nanoTime() - stepStart);
                }
                for (Decoding.Step step : picks) {
                    report(step, request, text, onToken);
                    finish = step.finish();
                }
            }
            draftCounts = new GenerationResult.Drafts(drafting.drafted(), drafting.accepted());
        }
        return new GenerationResult(
                text.toString(),
                decoding.tokens(),
                finish,
                new Timings(prompt.length, promptMillis, decoding.count(), millisSince(decodeStart)),
                draftCounts);
    }

    /** Sends a picked token to the caller (its log-probability only when the request asked for them). */
    private static void report(
            Decoding.Step step, GenerationRequest request, StringBuilder text, Consumer<TokenEvent> onToken) {
        text.append(step.text());
        float logprob = request.logprobs() ? step.logprobs().logprob() : Float.NaN;
        onToken.accept(new TokenEvent(step.token(), step.text(), logprob));
    }

    private int remaining() {
        return sequence.capacity() - sequence.position();
    }

    private static double millisSince(long startNanos) {
        return (System.nanoTime() - startNanos) / 1e6;
    }
}
