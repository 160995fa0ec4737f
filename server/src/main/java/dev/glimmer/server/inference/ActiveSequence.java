package dev.glimmer.server.inference;

import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.generate.Decoding;
import dev.glimmer.engine.generate.Drafting;
import dev.glimmer.engine.generate.FinishReason;
import dev.glimmer.engine.generate.Vocabulary;
import java.util.Arrays;
import java.util.List;

/**
 * The scheduler's state of one running job: its KV cache (from the session manager), how much of
 * the prompt is processed, its {@link Decoding} (sampler, text decoder, stop strings: the decode rules
 * the engine's {@code Generator} applies too) and the token waiting to be fed in the next decode step.
 */
final class ActiveSequence {
    final InferenceJob job;
    /** Its session and what its cache held when admitted; replaced once by {@link #started}. */
    SessionManager.Lease lease;
    /** Whether its prompt's computing has begun ({@link #started}): until then it may take more of a shared prefix. */
    private boolean started;

    private final Vocabulary vocabulary;
    private final Decoding decoding;
    /** Its conversation's speculative steps (when it decodes alone), or null when the pool does not draft. */
    private final Drafting drafting;
    /** What the conversation had drafted and accepted before this request. */
    private final int draftedBefore;

    private final int acceptedBefore;

    private int prefilled;
    private int pendingToken = -1;
    /**
     * A greedy token fed to the step under way before the decode rules saw it ({@link #stepped}), or -1: the rules run
     * on it while the device computes ({@link #deliverPredicted}).
     */
    private int predicted = -1;
    /** The context room the predicted token is judged with: the cache's, before that token's step. */
    private int predictedRoom;
    /** Set once the sequence's end was reported while a step it is in still runs: it is released when that is back. */
    private boolean reported;

    private final long promptStart = System.nanoTime();
    private long decodeStart;
    private long lastTokenNanos;
    private double promptMillis;

    /** @param drafting its conversation's speculative steps, null for none ({@link Scheduler}'s pool does not draft) */
    ActiveSequence(
            InferenceJob job, SessionManager.Lease lease, Vocabulary vocabulary, int vocabSize, Drafting drafting) {
        this.job = job;
        this.vocabulary = vocabulary;
        this.lease = lease;
        this.decoding = new Decoding(
                vocabulary,
                vocabSize,
                job.sampling(),
                job.prompt(),
                job.stop(),
                job.maxTokens(),
                cache().capacity() - job.prompt().length,
                job.logprobs(),
                job.topLogprobs(),
                job.constraint());
        this.prefilled = lease.reused();
        this.drafting = drafting;
        this.draftedBefore = drafting == null ? 0 : drafting.drafted();
        this.acceptedBefore = drafting == null ? 0 : drafting.accepted();
    }

    SequencePool.Sequence cache() {
        return lease.session().cache();
    }

    /** Positions the cache has left. */
    int remaining() {
        return cache().capacity() - cache().position();
    }

    boolean prefilling() {
        return prefilled < job.prompt().length;
    }

    int prefilled() {
        return prefilled;
    }

    /** Whether {@link #started} was called. */
    boolean hasStarted() {
        return started;
    }

    /**
     * Its prompt's computing begins, from what {@code lease} (its own session) holds now: the admission's lease, or
     * one that took a longer shared prefix since ({@link SessionManager#catchUp}).
     */
    void started(SessionManager.Lease lease) {
        if (lease.session() != this.lease.session()) {
            throw new IllegalArgumentException("another session's lease");
        }
        this.lease = lease;
        this.prefilled = lease.reused();
        this.started = true;
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
     * Takes what the step of the last fed token gave. A greedy token that cannot end the sequence by itself (not an
     * end-of-generation token, not the last the token limit or the context allows) becomes the next step's token at
     * once, before the decode rules run on it ({@link #deliverPredicted}), so that the next step need not wait for
     * the detokenizing, stop strings and reporting; a stop string may still end the sequence then, and its speculative
     * step is undone ({@link Scheduler}). Anything else is picked here ({@link #next}).
     *
     * @return why the sequence ends, or null when it goes on
     */
    FinishReason stepped(SequencePool.Next step) {
        int token = step.greedyToken();
        if (step.logits() == null
                && generatedCount() + 1 < job.maxTokens()
                && remaining() > 0
                && !vocabulary.isEndOfGeneration(token)) {
            predicted = token;
            predictedRoom = remaining();
            pendingToken = token;
            return null;
        }
        return next(step);
    }

    /** True while a predicted token awaits its decode rules. */
    boolean hasPrediction() {
        return predicted >= 0;
    }

    /**
     * Runs the decode rules on the predicted token and reports it: what {@link #next} would have done with it.
     *
     * @return why the sequence ends (its token, already fed, is then one too many in the cache), or null
     */
    FinishReason deliverPredicted() {
        int token = predicted;
        predicted = -1;
        return pick(null, token, predictedRoom);
    }

    /**
     * Picks the next token from what the last fed token's step gave (its logits, or the greedy token
     * alone when its {@link #readout} took it) and reports it.
     *
     * @return why the sequence ends, or null when its token is to be fed in the next decode step
     */
    FinishReason next(SequencePool.Next step) {
        return pick(step.logits(), step.greedyToken(), remaining());
    }

    private FinishReason pick(float[] logits, int greedyToken, int contextRoom) {
        pendingToken = -1;
        Decoding.Step picked = decoding.next(logits, greedyToken, contextRoom);
        lastTokenNanos = System.nanoTime();
        job.emit(new JobEvent.Token(picked.token(), picked.text(), picked.logprobs()));
        if (picked.finish() == null) {
            pendingToken = picked.token();
        }
        return picked.finish();
    }

    /** Whether its next step is to be speculative (asked when it is the one sequence decoding). */
    boolean draftsNext() {
        return drafting != null && drafting.draftNext(decoding);
    }

    /**
     * A speculative step of the pending token ({@link Drafting#step}): every pick is made by its decode rules as a
     * plain step would make it, and reported in order.
     *
     * @return the picks; the last one's finish says why the sequence ends, or null when its token is fed next
     */
    List<Decoding.Step> speculate() {
        int token = pendingToken;
        pendingToken = -1;
        List<Decoding.Step> picks = drafting.step(cache(), token, decoding);
        for (Decoding.Step picked : picks) {
            job.emit(new JobEvent.Token(picked.token(), picked.text(), picked.logprobs()));
        }
        lastTokenNanos = System.nanoTime();
        if (picks.getLast().finish() == null) {
            pendingToken = picks.getLast().token();
        }
        return picks;
    }

    /** A plain step of this sequence alone took {@code nanos}: what its drafting compares a speculative step with. */
    void steppedAlone(long nanos) {
        if (drafting != null) {
            drafting.plainStep(nanos);
        }
    }

    /** Tokens its speculative steps drafted. */
    int drafted() {
        return drafting == null ? 0 : drafting.drafted() - draftedBefore;
    }

    /** Drafted tokens accepted. */
    int accepted() {
        return drafting == null ? 0 : drafting.accepted() - acceptedBefore;
    }

    /** Marks the end as reported while a step holding this sequence still runs. */
    void reportedEarly() {
        reported = true;
    }

    boolean reported() {
        return reported;
    }

    /** The stop string that ended this sequence, or null when none did. */
    String matchedStop() {
        return decoding.matchedStop();
    }

    /** The tokens the KV cache holds, in order: the prompt and every generated token fed so far. */
    int[] cachedTokens() {
        int[] prompt = job.prompt();
        int size = cache().position();
        int[] tokens = Arrays.copyOf(prompt, size);
        if (size > prompt.length) {
            System.arraycopy(decoding.tokens(), 0, tokens, prompt.length, size - prompt.length);
        }
        return tokens;
    }
}
