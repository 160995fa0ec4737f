package dev.glimmer.server.inference;

import dev.glimmer.engine.generate.FinishReason;
import dev.glimmer.engine.generate.StopStrings;
import dev.glimmer.engine.generate.TextDecoder;
import dev.glimmer.engine.generate.Vocabulary;
import dev.glimmer.engine.grammar.TokenConstraint;
import dev.glimmer.engine.sampling.Sampler;
import dev.glimmer.engine.sampling.TokenLogprobs;

import java.util.Arrays;

/**
 * The scheduler's state of one running job: its KV cache (from the session manager), how much of
 * the prompt is processed, its own sampler, text decoder and stop-string matcher, and the token
 * waiting to be fed in the next decode step. The decode rules are the engine {@code Generator}'s
 * (end-of-generation token, stop string, token limit, full context), applied one step at a time so
 * that several sequences can share each forward step.
 */
final class ActiveSequence {
    final InferenceJob job;
    final SessionManager.Lease lease;
    private final Vocabulary vocabulary;
    private final int vocabSize;
    private final Sampler sampler;
    private final TextDecoder decoder;
    private final StopStrings stops;
    private final int[] generated;
    private int count;
    private int prefilled;
    private int pendingToken = -1;
    private final long promptStart = System.nanoTime();
    private long decodeStart;
    private long lastTokenNanos;
    private double promptMillis;

    ActiveSequence(InferenceJob job, SessionManager.Lease lease, Vocabulary vocabulary, int vocabSize) {
        this.job = job;
        this.lease = lease;
        this.vocabulary = vocabulary;
        this.vocabSize = vocabSize;
        this.sampler = new Sampler(job.sampling(), vocabSize);
        for (int token : job.prompt()) {
            sampler.accept(token);
        }
        this.decoder = vocabulary.newDecoder();
        this.stops = new StopStrings(job.stop());
        this.generated = new int[Math.max(1, Math.min(job.maxTokens(), cache().capacity() - job.prompt().length + 1))];
        this.prefilled = lease.reused();
    }

    SequenceCache cache() {
        return lease.session().cache();
    }

    boolean prefilling() {
        return prefilled < job.prompt().length;
    }

    int prefilled() {
        return prefilled;
    }

    void prefilledUpTo(int n) {
        prefilled = n;
    }

    int pendingToken() {
        return pendingToken;
    }

    int generatedCount() {
        return count;
    }

    /** Called when the prompt is processed: the prompt phase's clock stops. */
    void promptDone() {
        promptMillis = (System.nanoTime() - promptStart) / 1e6;
        decodeStart = System.nanoTime();
        lastTokenNanos = decodeStart;
    }

    double promptMillis() {
        return promptMillis;
    }

    double generationMillis() {
        return decodeStart == 0 ? 0 : (System.nanoTime() - decodeStart) / 1e6;
    }

    long lastTokenNanos() {
        return lastTokenNanos;
    }

    /**
     * True when the next token is the greedy one and nothing else reads the logits (no log-probabilities
     * asked for): a decode step may give this sequence its greedy token instead of its logits.
     */
    boolean greedyOnly() {
        return sampler.picksFirstMaximum() && !job.logprobs() && job.constraint() == null;
    }

    /**
     * Picks the next token from what the last fed token's step gave (its logits, or the greedy token
     * alone when {@link #greedyOnly}) and reports it.
     *
     * @return why the sequence ends, or null when its token is to be fed in the next decode step
     */
    FinishReason next(StepRunner.NextToken step) {
        pendingToken = -1;
        float[] logits = step.logits();
        TokenConstraint constraint = job.constraint();
        int token;
        if (logits == null) {
            token = step.greedyToken();
        } else if (constraint == null) {
            token = sampler.sample(logits);
        } else {
            token = sampler.sample(logits, constraint.allowed(tokensLeft()));
            constraint.accept(token);
        }
        sampler.accept(token);
        TokenLogprobs logprobs = job.logprobs() ? TokenLogprobs.of(logits, vocabSize, token, job.topLogprobs()) : null;
        generated[count++] = token;
        lastTokenNanos = System.nanoTime();
        if (vocabulary.isEndOfGeneration(token)) {
            job.emit(new JobEvent.Token(token, stops.push(decoder.finish()) + stops.flush(), logprobs));
            return FinishReason.STOP;
        }
        String visible = stops.push(decoder.next(token));
        if (stops.matched()) {
            job.emit(new JobEvent.Token(token, visible, logprobs));
            return FinishReason.STOP;
        }
        boolean full = count == job.maxTokens() || count == generated.length || cache().remaining() == 0;
        if (full) {
            // The last token: release whatever is held back (no stop string can complete any more).
            visible += stops.push(decoder.finish());
            visible += stops.matched() ? "" : stops.flush();
        }
        job.emit(new JobEvent.Token(token, visible, logprobs));
        if (stops.matched()) {
            return FinishReason.STOP;
        }
        if (full) {
            return FinishReason.LENGTH;
        }
        pendingToken = token;
        return null;
    }

    /** The stop string that ended this sequence, or null when none did. */
    String matchedStop() {
        return stops.matchedStop();
    }

    /**
     * How many tokens this sequence may still generate, the next one included: the token limit, or
     * the context (the next token needs no room in the cache; each one after it does).
     */
    private int tokensLeft() {
        int limit = Math.min(job.maxTokens(), generated.length) - count;
        return Math.max(1, Math.min(limit, cache().remaining() + 1));
    }

    /** The tokens the KV cache holds, in order: the prompt and every generated token fed so far. */
    int[] cachedTokens() {
        int[] prompt = job.prompt();
        int size = cache().size();
        int[] tokens = Arrays.copyOf(prompt, size);
        if (size > prompt.length) {
            System.arraycopy(generated, 0, tokens, prompt.length, size - prompt.length);
        }
        return tokens;
    }
}
