package dev.glimmer.server.inference;

import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.generate.Decoding;
import dev.glimmer.engine.generate.Drafting;
import dev.glimmer.engine.generate.FinishReason;
import dev.glimmer.engine.generate.Vocabulary;
import dev.glimmer.server.metrics.ServerMetrics;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The one owner of the model: a platform thread that runs every forward pass through the backend's
 * {@link SequencePool}. Up to {@code parallel} jobs run at once (continuous batching): each loop turn
 * processes one prompt chunk (of the oldest job still in its prompt, the next ones' filling what it leaves of the
 * chunk: {@link #prefillChunk}), then one decode step that feeds
 * the pending token of every generating job (on the CPU in a single batched forward pass, on a GPU in one
 * batch step over its KV pool). A job joins at the next turn after a slot frees and leaves as
 * soon as it ends. Beyond {@code parallel}, up to {@code queue} jobs wait; more
 * are refused with 503 ({@link #submit}).
 *
 * <p>On a GPU the device should never wait for the host: a decode step is launched as soon as the previous one's
 * results are back, and the host then delivers that previous step's tokens (decode rules, detokenizing, stop
 * strings, events to the handlers, metrics) while the device computes. A greedy token is fed before its delivery
 * ({@link ActiveSequence#stepped}); should the delivery end the sequence (a stop string), the extra position its
 * step wrote is truncated when that step is back, so the cache holds exactly what it would have held otherwise, and
 * only then is the sequence's session released. Nothing else touches the device while a step is in flight: the next
 * turn's admissions, cancellations and prompt chunk wait for its results.
 *
 * <p>Speculative decoding (docs/SPECULATIVE.md): with a pool that drafts, a sequence that is the only one decoding
 * takes speculative steps ({@link ActiveSequence#speculate}: drafts verified in one pass, every accepted token through
 * the same decode rules) while its acceptance pays for them ({@link Drafting}, one per conversation: a follow-up
 * request goes on with what the earlier turns saw). Several sequences decoding share one
 * plain batched step instead: the pool drafts for one sequence per pass ({@link SequencePool#speculate}), and a batch
 * already gives each pass several tokens.
 *
 * <p>Cancellation ({@link InferenceJob#cancel}) is checked every turn, so a cancelled job stops
 * within one token or one prompt chunk, and its slot and session are released at once.
 *
 * <p>The thread is the only one that touches the model's memory while serving, so it is also the one
 * that frees it, after its last step ({@link #close}). A {@link RuntimeException} in a step ends the
 * requests it touched; an {@link Error} (out of memory, ...) ends generation for good ({@link #failure}).
 */
public final class Scheduler {
    private static final Logger LOG = Logger.getLogger(Scheduler.class.getName());
    /** What a client is told to wait before retrying when the queue is full. */
    static final int RETRY_AFTER_SECONDS = 2;

    private final SequencePool pool;
    /** Whether the pool is a GPU's KV pool, whose slots and memory {@code /metrics} shows. */
    private final boolean reportPool;

    private final Vocabulary vocabulary;
    private final int vocabSize;
    private final SessionManager sessions;
    private final ServerMetrics metrics;
    private final int parallel;
    private final int promptChunk;
    private final int capacity;
    /** Tokens a speculative step drafts; 0: plain steps only. */
    private final int drafts;
    /** When a sequence drafts: while it pays, or (tests) always. */
    private final Drafting.Use draftUse;
    /** What lone steps take, plain and speculative, across the sequences: the cost drafting must pay for. */
    private final Drafting.StepCost stepCost = new Drafting.StepCost();

    private final ConcurrentLinkedQueue<InferenceJob> waiting = new ConcurrentLinkedQueue<>();
    private final List<ActiveSequence> active = new ArrayList<>();
    /** Jobs accepted and not yet ended: waiting or active. */
    private final AtomicInteger admitted = new AtomicInteger();

    private final Runnable release;
    private final Thread thread;
    private volatile boolean stopping;
    /** The Error that stopped generation, or null. */
    private volatile Error failure;
    /** Set once the thread has ended and failed the waiting jobs; a job added later must not wait. */
    private volatile boolean drained;
    /** The decode step the device is computing and the sequences in it, or null. */
    private InFlight inFlight;
    /** When the last decode step's results came back; 0 when a prompt chunk ran since (the device was not idle). */
    private long lastResultsNanos;

    private record InFlight(List<ActiveSequence> batch, SequencePool.Launched step, long launchedNanos) {}

    /**
     * Starts the scheduler's thread.
     *
     * @param reportPool whether {@code /metrics} shows the pool's slots and memory (a GPU's KV pool)
     * @param drafts     tokens each speculative step drafts ({@code ≤ pool.maxDrafts()}); 0: plain steps only
     * @param draftUse   when a sequence drafts ({@link Drafting.Use#WHILE_PAYING} but in tests)
     * @param release    frees what the steps use (caches, backend, weights); run by the scheduler's thread
     *                   once it has stopped, so that nothing is freed under a running step
     */
    Scheduler(
            SequencePool pool,
            boolean reportPool,
            Vocabulary vocabulary,
            int vocabSize,
            SessionManager sessions,
            ServerMetrics metrics,
            int parallel,
            int promptChunk,
            int queue,
            int drafts,
            Drafting.Use draftUse,
            Runnable release) {
        if (drafts < 0 || drafts > pool.maxDrafts()) {
            throw new IllegalArgumentException(drafts + " drafts: the pool drafts at most " + pool.maxDrafts());
        }
        this.pool = pool;
        this.drafts = drafts;
        this.draftUse = draftUse;
        this.reportPool = reportPool;
        this.vocabulary = vocabulary;
        this.vocabSize = vocabSize;
        this.sessions = sessions;
        this.metrics = metrics;
        this.parallel = parallel;
        this.promptChunk = promptChunk;
        this.capacity = parallel + queue;
        this.release = release;
        this.thread = Thread.ofPlatform().name("glimmer-scheduler").daemon().start(this::run);
    }

    /**
     * Queues {@code job}; its events follow on the job's queue.
     *
     * @throws UnavailableException when every slot and queue place is taken, or while shutting down
     */
    public void submit(InferenceJob job) {
        if (stopping || drained) {
            throw new UnavailableException("the server is shutting down", RETRY_AFTER_SECONDS);
        }
        while (true) {
            int n = admitted.get();
            if (n >= capacity) {
                throw new UnavailableException(
                        "the server is busy: " + parallel + " requests are running and " + (capacity - parallel)
                                + " waiting; retry later",
                        RETRY_AFTER_SECONDS);
            }
            if (admitted.compareAndSet(n, n + 1)) {
                break;
            }
        }
        waiting.add(job);
        if (drained && waiting.remove(job)) {
            admitted.decrementAndGet();
            throw new UnavailableException("the server is shutting down", RETRY_AFTER_SECONDS);
        }
        metrics.queued(waiting.size());
        LockSupport.unpark(thread);
    }

    /** The sessions whose caches this scheduler runs. */
    SessionManager sessions() {
        return sessions;
    }

    /** Jobs accepted and not yet ended (running or waiting). */
    public int admitted() {
        return admitted.get();
    }

    private void run() {
        try {
            while (!stopping) {
                try {
                    turn();
                } catch (RuntimeException e) {
                    // A bug in a forward pass: fail the jobs it touched, keep serving the others.
                    LOG.log(Level.SEVERE, "a forward step failed; its requests are ended", e);
                    failAll("internal error: " + e);
                }
            }
            try {
                collectStep();
            } catch (RuntimeException e) {
                LOG.log(Level.SEVERE, "the last forward step failed; its requests are ended", e);
                failAll("internal error: " + e);
            }
            for (ActiveSequence s : List.copyOf(active)) {
                end(s, FinishReason.STOP, null);
            }
        } catch (Error e) {
            // Out of memory, a stack overflow, a broken invariant: the process is in no state to go on
            // generating. Every request ends, later ones get 503 (ModelHost.require), /health says why.
            failure = e;
            LOG.log(Level.SEVERE, "generation stopped after " + e + "; restart the server", e);
            failAll("internal error: " + e);
        } finally {
            String why = failure == null ? "the server is shutting down" : "generation stopped after an internal error";
            failWaiting(why);
            drained = true;
            // A job submitted while the flag was being set is failed here (submit sees the flag otherwise).
            failWaiting(why);
            updateGauges();
            // No step runs any more: only now may the caches, the backend and the weights be freed.
            release.run();
        }
    }

    /** Ends every running job after a failure, once a step still in flight is done with their caches. */
    private void failAll(String why) {
        if (inFlight != null) {
            SequencePool.Launched step = inFlight.step();
            inFlight = null;
            try {
                step.results();
            } catch (RuntimeException e) {
                LOG.log(Level.FINE, "the step in flight failed too", e);
            }
        }
        for (ActiveSequence s : List.copyOf(active)) {
            if (s.reported()) {
                release(s, false);
            } else {
                end(s, null, why);
            }
        }
    }

    private void failWaiting(String why) {
        InferenceJob job;
        while ((job = waiting.poll()) != null) {
            job.emit(new JobEvent.Failed(why, failure == null));
            admitted.decrementAndGet();
        }
    }

    private void turn() {
        collectStep();
        dropCancelledWaiting();
        admit();
        for (ActiveSequence s : List.copyOf(active)) {
            if (s.job.isCancelled()) {
                end(s, FinishReason.CANCELLED, null);
            }
        }
        if (active.isEmpty()) {
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(50));
            return;
        }
        if (active.stream().anyMatch(ActiveSequence::prefilling)) {
            // The prompt chunk takes the device first: deliver the tokens it would hold back.
            deliverPredicted();
            prefillChunk();
            lastResultsNanos = 0;
        }
        ActiveSequence alone = decodingAlone();
        if (alone != null && drafts > 0) {
            // Its last token's rules first: a speculative step's picks go on from them.
            deliverPredicted();
            if (active.contains(alone) && alone.pendingToken() >= 0 && alone.draftsNext()) {
                speculativeStep(alone);
                return;
            }
        }
        launchStep();
        deliverPredicted();
    }

    /** The one sequence with a token to feed, or null when none or several have one. */
    private ActiveSequence decodingAlone() {
        ActiveSequence alone = null;
        for (ActiveSequence s : active) {
            if (s.pendingToken() >= 0) {
                if (alone != null) {
                    return null;
                }
                alone = s;
            }
        }
        return alone;
    }

    /** A speculative step of {@code s}, run here and now: its picks are reported, its end taken at once. */
    private void speculativeStep(ActiveSequence s) {
        long previous = s.lastTokenNanos();
        int drafted = s.drafted();
        int accepted = s.accepted();
        long start = System.nanoTime();
        if (lastResultsNanos != 0) {
            metrics.decodeGap(Duration.ofNanos(start - lastResultsNanos));
        }
        List<Decoding.Step> picks = s.speculate();
        lastResultsNanos = System.nanoTime();
        metrics.decodeStep(1, Duration.ofNanos(lastResultsNanos - start));
        metrics.speculativeStep(s.drafted() - drafted, s.accepted() - accepted);
        // The first token waited for the step; the accepted ones after it came with it.
        metrics.token(Duration.ofNanos(s.lastTokenNanos() - previous));
        for (int i = 1; i < picks.size(); i++) {
            metrics.token(Duration.ZERO);
        }
        FinishReason finish = picks.getLast().finish();
        if (finish != null) {
            end(s, finish, null);
        }
    }

    private void dropCancelledWaiting() {
        for (Iterator<InferenceJob> it = waiting.iterator(); it.hasNext(); ) {
            InferenceJob job = it.next();
            if (job.isCancelled()) {
                it.remove();
                job.emit(new JobEvent.Finished(FinishReason.CANCELLED, job.prompt().length, 0, 0, 0, 0, null, 0, 0));
                metrics.cancelled();
                admitted.decrementAndGet();
                metrics.queued(waiting.size());
            }
        }
    }

    private void admit() {
        if (active.size() >= parallel || waiting.isEmpty()) {
            return;
        }
        while (active.size() < parallel && !waiting.isEmpty()) {
            InferenceJob job = waiting.poll();
            SessionManager.Lease lease;
            try {
                lease = sessions.acquire(job.prompt());
                if (lease.copied() > 0) {
                    metrics.prefixHit(lease.from(), lease.copied());
                }
            } catch (RuntimeException e) {
                // No cache could be made (a GPU out of memory): this job fails, the running ones go on.
                LOG.log(Level.SEVERE, "no KV cache for a request", e);
                job.emit(new JobEvent.Failed("the request could not start: " + e.getMessage(), false));
                admitted.decrementAndGet();
                continue;
            }
            try {
                Drafting drafting = drafts == 0
                        ? null
                        : lease.session()
                                .drafting(() ->
                                        new Drafting(pool, drafts, SequencePool.DraftFilter.NONE, draftUse, stepCost));
                active.add(new ActiveSequence(job, lease, vocabulary, vocabSize, drafting));
            } catch (RuntimeException e) {
                // The handler checks requests before submitting them; this only guards the other jobs.
                LOG.log(Level.SEVERE, "a request could not start", e);
                sessions.release(lease.session(), Arrays.copyOf(job.prompt(), lease.reused()));
                job.emit(new JobEvent.Failed("the request could not start: " + e.getMessage(), false));
                admitted.decrementAndGet();
            }
        }
        updateGauges();
    }

    /**
     * One pass of up to {@code promptChunk} prompt tokens: the oldest prompt still being processed takes them, and when
     * what is left of it is less, the next prompts whose whole rest fits in what is left of the pass join it (computed
     * as rows of one batch where the pool can: agents' short turns after a shared system prompt start together). Only
     * a whole rest: a prompt's part in a pass it does not finish in would delay the others' first tokens for none of
     * its own (bench-serve with 600-token own parts: p50 twice as long). A prompt whose start a prompt ahead of it is
     * still computing waits for it, to copy it when its turn comes rather than compute it again.
     */
    private void prefillChunk() {
        List<ActiveSequence> batch = new ArrayList<>();
        List<Integer> takes = new ArrayList<>(); // each one's tokens of this pass
        List<ActiveSequence> ahead = new ArrayList<>();
        int budget = promptChunk;
        for (ActiveSequence s : active) {
            if (budget == 0) {
                break;
            }
            if (!s.prefilling()) {
                continue;
            }
            boolean waits = ahead.stream().anyMatch(a -> computesStartOf(a, s));
            ahead.add(s);
            if (waits) {
                continue;
            }
            if (!s.hasStarted()) {
                start(s);
            }
            int rest = s.job.prompt().length - s.prefilled();
            if (batch.isEmpty() || rest <= budget) {
                batch.add(s);
                takes.add(Math.min(budget, rest));
                budget -= takes.getLast();
            }
        }
        if (batch.isEmpty()) {
            return;
        }
        int n = batch.size();
        List<SequencePool.Sequence> caches = new ArrayList<>(n);
        List<int[]> prompts = new ArrayList<>(n);
        int[] from = new int[n];
        int[] counts = new int[n];
        SequencePool.Readout[] readouts = new SequencePool.Readout[n];
        for (int i = 0; i < n; i++) {
            ActiveSequence s = batch.get(i);
            caches.add(s.cache());
            prompts.add(s.job.prompt());
            from[i] = s.prefilled();
            counts[i] = takes.get(i);
            readouts[i] = SequencePool.Readout.LOGITS;
        }
        SequencePool.Next[] logits = pool.prompts(caches, prompts, from, counts, readouts);
        metrics.promptPass(n);
        for (int i = 0; i < n; i++) {
            promptRan(batch.get(i), from[i] + counts[i], logits[i]);
        }
    }

    /**
     * Whether {@code ahead}, a prompt before {@code s}, is still computing a start of {@code s}'s prompt longer than
     * what {@code s} holds, by enough for {@code s} to copy it rather than compute it ({@link SessionManager#worthCopying}).
     */
    private static boolean computesStartOf(ActiveSequence ahead, ActiveSequence s) {
        int[] prompt = s.job.prompt();
        int shared = Math.min(SessionManager.commonPrefix(ahead.job.prompt(), prompt), prompt.length - 1);
        return ahead.prefilled() < shared && SessionManager.worthCopying(s.prefilled(), shared);
    }

    /** After a prompt pass that took {@code s} to {@code prefilled} tokens: its progress, or its first token. */
    private void promptRan(ActiveSequence s, int prefilled, SequencePool.Next logits) {
        int[] prompt = s.job.prompt();
        metrics.promptChunk(prefilled - s.prefilled());
        s.prefilledUpTo(prefilled);
        if (s.prefilling()) {
            s.job.emit(new JobEvent.PromptProgress(prefilled, prompt.length));
            return;
        }
        s.promptDone();
        int cached = s.lease.reused();
        metrics.promptDone(prompt.length - cached, cached, Duration.ofNanos((long) (s.promptMillis() * 1e6)));
        FinishReason finish = s.next(logits);
        metrics.firstToken(Duration.ofNanos(System.nanoTime() - s.job.createdNanos()));
        if (finish != null) {
            end(s, finish, null);
        }
    }

    /**
     * Begins a sequence's prompt: first takes the part of it that another cache computed since it was admitted (the
     * prefix its neighbours share is computed once), then tells the job how much of its prompt is cached.
     */
    private void start(ActiveSequence s) {
        SessionManager.Lease lease = sessions.catchUp(s.lease, s.job.prompt());
        if (lease != s.lease) {
            metrics.prefixHit(lease.from(), lease.reused() - s.lease.reused());
        }
        s.started(lease);
        s.job.emit(new JobEvent.Admitted(s.job.prompt().length, lease.reused()));
    }

    /** Launches one decode step that feeds the pending token of every generating sequence. */
    private void launchStep() {
        List<ActiveSequence> batch =
                active.stream().filter(s -> s.pendingToken() >= 0).toList();
        int n = batch.size();
        if (n == 0) {
            return;
        }
        List<SequencePool.Sequence> caches = new ArrayList<>(n);
        int[] tokens = new int[n];
        SequencePool.Readout[] readouts = new SequencePool.Readout[n];
        for (int i = 0; i < n; i++) {
            ActiveSequence s = batch.get(i);
            caches.add(s.cache());
            tokens[i] = s.pendingToken();
            readouts[i] = s.readout();
        }
        long now = System.nanoTime();
        if (lastResultsNanos != 0) {
            metrics.decodeGap(Duration.ofNanos(now - lastResultsNanos));
        }
        inFlight = new InFlight(batch, pool.launch(caches, tokens, readouts), now);
    }

    /**
     * Waits for the step in flight, if any, and takes its results: a sequence whose end was reported meanwhile has
     * its speculative position cut off and its session released; the others get their next token, predicted
     * ({@link ActiveSequence#stepped}) or picked now.
     */
    private void collectStep() {
        if (inFlight == null) {
            return;
        }
        InFlight step = inFlight;
        inFlight = null;
        SequencePool.Next[] next = step.step().results();
        lastResultsNanos = System.nanoTime();
        metrics.decodeStep(step.batch().size(), Duration.ofNanos(lastResultsNanos - step.launchedNanos()));
        for (int i = 0; i < next.length; i++) {
            ActiveSequence s = step.batch().get(i);
            if (s.reported()) {
                s.cache().truncate(s.cache().position() - 1);
                release(s, true);
                continue;
            }
            if (next.length == 1) {
                s.steppedAlone(lastResultsNanos - step.launchedNanos());
            }
            long previous = s.lastTokenNanos();
            FinishReason finish = s.stepped(next[i]);
            if (!s.hasPrediction()) {
                metrics.token(Duration.ofNanos(s.lastTokenNanos() - previous));
            }
            if (finish != null) {
                end(s, finish, null);
            }
        }
    }

    /**
     * Runs the decode rules on every predicted token and reports it. A sequence that ends by it is reported now and,
     * when the step in flight holds it, released once that step is back.
     */
    private void deliverPredicted() {
        for (ActiveSequence s : List.copyOf(active)) {
            if (!s.hasPrediction()) {
                continue;
            }
            long previous = s.lastTokenNanos();
            FinishReason finish = s.deliverPredicted();
            metrics.token(Duration.ofNanos(s.lastTokenNanos() - previous));
            if (finish == null) {
                continue;
            }
            if (inFlight != null && inFlight.batch().contains(s)) {
                report(s, finish, null);
                s.reportedEarly();
            } else {
                end(s, finish, null);
            }
        }
    }

    /** Ends a sequence: reports it, returns its session, frees its slot. {@code reason} null means it failed. */
    private void end(ActiveSequence s, FinishReason reason, String failure) {
        report(s, reason, failure);
        release(s, reason != null);
    }

    /** Tells the job how it ended and frees its place among the admitted jobs. */
    private void report(ActiveSequence s, FinishReason reason, String failure) {
        metrics.requestEnded(reason, Duration.ofNanos(System.nanoTime() - s.job.createdNanos()));
        if (reason == null) {
            s.job.emit(new JobEvent.Failed(failure, false));
        } else {
            if (reason == FinishReason.CANCELLED) {
                metrics.cancelled();
            }
            metrics.generation(s.generatedCount(), Duration.ofNanos((long) (s.generationMillis() * 1e6)));
            JobEvent.Finished finished = new JobEvent.Finished(
                    reason,
                    s.job.prompt().length,
                    s.lease.reused(),
                    s.generatedCount(),
                    s.promptMillis(),
                    s.generationMillis(),
                    s.matchedStop(),
                    s.drafted(),
                    s.accepted());
            LOG.info(String.format(
                            Locale.ROOT,
                            "%d prompt tokens (%d cached) in %.0f ms, %d generated in %.0f ms: %s",
                            finished.promptTokens(),
                            finished.cachedTokens(),
                            finished.promptMillis(),
                            finished.generatedTokens(),
                            finished.generationMillis(),
                            reason.apiName())
                    + (finished.draftedTokens() == 0
                            ? ""
                            : "; " + finished.draftedTokens() + " drafted, " + finished.acceptedTokens()
                                    + " accepted"));
            s.job.emit(finished);
        }
        admitted.decrementAndGet();
    }

    /** Frees a sequence's slot and returns its session: kept for reuse when its cache is known ({@code keep}), else dropped. */
    private void release(ActiveSequence s, boolean keep) {
        active.remove(s);
        if (keep) {
            sessions.release(s.lease.session(), s.cachedTokens());
        } else {
            sessions.discard(s.lease.session());
        }
        updateGauges();
    }

    private void updateGauges() {
        metrics.running(active.size());
        metrics.queued(waiting.size());
        metrics.kvCache(sessions.bytesUsed(), sessions.budgetBytes(), sessions.sessions());
        if (reportPool) {
            metrics.kvPool(pool.inUse(), pool.slots(), pool.bytes());
        }
    }

    /** The Error that stopped generation for good (out of memory, ...), if one did. */
    public Optional<Error> failure() {
        return Optional.ofNullable(failure);
    }

    /**
     * Stops taking jobs and ends running ones (their streams get a final chunk); the scheduler's thread
     * then frees the model's memory itself, after its last step. Waits up to {@code wait} for that.
     *
     * @return true when the thread has ended; false when a step is still running after {@code wait}
     *         (a stuck GPU): nothing is freed under it, and it frees everything if it ever returns
     */
    boolean close(Duration wait) {
        stopping = true;
        LockSupport.unpark(thread);
        try {
            return thread.join(wait);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return !thread.isAlive();
        }
    }
}
