package dev.glimmer.server.inference;

import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.generate.Decoding;
import dev.glimmer.engine.generate.FinishReason;
import dev.glimmer.engine.generate.Vocabulary;

import java.util.Arrays;

/**
 * The scheduler's state of one running job: its KV cache (from the session manager), how much of
 * the prompt is processed, its {@link Decoding} (sampler, text decoder, stop strings: the decode rules
 * the engine's {@code Generator} applies too) and the token waiting to be fed in the next decode step.
 */
final class ActiveSequence<C extends SequenceCache> {
    final InferenceJob job;
    final SessionManager.Lease<C> lease;
    private final Decoding decoding;
    private int prefilled;
    private int pendingToken = -1;
    private final long promptStart = System.nanoTime();
    private long decodeStart;
    private long lastTokenNanos;
    private double promptMillis;

    ActiveSequence(InferenceJob job, SessionManager.Lease<C> lease, Vocabulary vocabulary, int vocabSize) {
        this.job = job;
        this.lease = lease;
        this.decoding = new Decoding(vocabulary, vocabSize, job.sampling(), job.prompt(), job.stop(), job.maxTokens(),
                cache().capacity() - job.prompt().length, job.logprobs(), job.topLogprobs(), job.constraint());
        this.prefilled = lease.reused();
    }

    C cache() {
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
        return decoding.count();
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

    /** See {@link Decoding#readout}. */
    SequencePool.Readout readout() {
        return decoding.readout();
    }

    /**
     * Picks the next token from what the last fed token's step gave (its logits, or the greedy token
     * alone when its {@link #readout} took it) and reports it.
     *
     * @return why the sequence ends, or null when its token is to be fed in the next decode step
     */
    FinishReason next(StepRunner.NextToken step) {
        pendingToken = -1;
        Decoding.Step picked = decoding.next(step.logits(), step.greedyToken(), cache().remaining());
        lastTokenNanos = System.nanoTime();
        job.emit(new JobEvent.Token(picked.token(), picked.text(), picked.logprobs()));
        if (picked.finish() == null) {
            pendingToken = picked.token();
        }
        return picked.finish();
    }

    /** The stop string that ended this sequence, or null when none did. */
    String matchedStop() {
        return decoding.matchedStop();
    }

    /** The tokens the KV cache holds, in order: the prompt and every generated token fed so far. */
    int[] cachedTokens() {
        int[] prompt = job.prompt();
        int size = cache().size();
        int[] tokens = Arrays.copyOf(prompt, size);
        if (size > prompt.length) {
            System.arraycopy(decoding.tokens(), 0, tokens, prompt.length, size - prompt.length);
        }
        return tokens;
    }
}
