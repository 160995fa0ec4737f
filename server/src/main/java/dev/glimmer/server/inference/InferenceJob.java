package dev.glimmer.server.inference;

import dev.glimmer.engine.grammar.TokenConstraint;
import dev.glimmer.engine.sampling.SamplingParams;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * One request's generation, shared by the HTTP handler that submitted it and the scheduler that
 * runs it. The scheduler reports through {@link #events}; the handler reads them and calls
 * {@link #cancel} when its client goes away. The event queue is unbounded so that the scheduler
 * never waits for a slow client (events are a few bytes each and a job has at most max_tokens of them).
 *
 * @see Scheduler
 */
public final class InferenceJob {
    private final int[] prompt;
    private final SamplingParams sampling;
    private final int maxTokens;
    private final List<String> stop;
    private final int topLogprobs;
    private final boolean logprobs;
    private final TokenConstraint constraint;
    private final long createdNanos = System.nanoTime();
    private final BlockingQueue<JobEvent> events = new LinkedBlockingQueue<>();
    private volatile boolean cancelled;

    /**
     * @param prompt      the prompt's token ids
     * @param maxTokens   the most tokens to generate (the context may end it sooner)
     * @param logprobs    whether each token reports its log-probability
     * @param topLogprobs alternatives reported per token
     */
    public InferenceJob(
            int[] prompt,
            SamplingParams sampling,
            int maxTokens,
            List<String> stop,
            boolean logprobs,
            int topLogprobs) {
        this(prompt, sampling, maxTokens, stop, logprobs, topLogprobs, null);
    }

    /** @param constraint keeps the output inside a grammar (JSON schema, forced tool call); null for none */
    public InferenceJob(
            int[] prompt,
            SamplingParams sampling,
            int maxTokens,
            List<String> stop,
            boolean logprobs,
            int topLogprobs,
            TokenConstraint constraint) {
        this.prompt = prompt.clone();
        this.sampling = sampling;
        this.maxTokens = maxTokens;
        this.stop = List.copyOf(stop);
        this.logprobs = logprobs;
        this.topLogprobs = topLogprobs;
        this.constraint = constraint;
    }

    int[] prompt() {
        return prompt;
    }

    SamplingParams sampling() {
        return sampling;
    }

    int maxTokens() {
        return maxTokens;
    }

    List<String> stop() {
        return stop;
    }

    boolean logprobs() {
        return logprobs;
    }

    int topLogprobs() {
        return topLogprobs;
    }

    /** The job's grammar constraint, or null. */
    TokenConstraint constraint() {
        return constraint;
    }

    long createdNanos() {
        return createdNanos;
    }

    /** Asks the scheduler to stop this job before its next token or prompt chunk; no effect once it has ended. */
    public void cancel() {
        cancelled = true;
    }

    public boolean isCancelled() {
        return cancelled;
    }

    /** The next event, or null when none came within the timeout. */
    public JobEvent poll(long timeout, TimeUnit unit) throws InterruptedException {
        return events.poll(timeout, unit);
    }

    void emit(JobEvent event) {
        events.add(event);
    }
}
