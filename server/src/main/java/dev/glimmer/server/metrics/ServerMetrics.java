package dev.glimmer.server.metrics;

import dev.glimmer.engine.generate.FinishReason;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.binder.jvm.ClassLoaderMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmGcMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmMemoryMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmThreadMetrics;
import io.micrometer.core.instrument.binder.system.ProcessorMetrics;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The server's Micrometer meters, exposed on {@code /metrics} in Prometheus text format. Names
 * follow llama-server's where one exists ({@code glimmer_} prefix instead of {@code llamacpp:}).
 * The inference side reports through the methods here; gauges read the atomic values. The same reports also feed
 * the {@code vllm:*} names that inference gateways and vLLM dashboards read ({@link VllmMetrics}).
 */
public final class ServerMetrics implements AutoCloseable {
    /** Prometheus text exposition format 0.0.4, what scrapers expect (docs/SERVING.md, Metrics). */
    public static final String CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

    private final PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    private final JvmGcMetrics gcMetrics = new JvmGcMetrics();

    private final Counter promptTokens;
    private final Counter promptTokensCached;
    private final Counter generatedTokens;
    private final Counter cancelledRequests;
    private final Counter speculativeSteps;
    private final Counter draftTokens;
    private final Counter draftTokensAccepted;
    private final Timer timeToFirstToken;
    private final Timer interTokenLatency;
    private final DistributionSummary promptSpeed;
    private final DistributionSummary generationSpeed;
    private final DistributionSummary decodeBatch;
    private final DistributionSummary promptBatch;
    private final Timer decodeStep;
    private final Timer decodeGap;

    private final AtomicLong running = new AtomicLong();
    private final AtomicLong queued = new AtomicLong();
    private final AtomicLong kvBytesUsed = new AtomicLong();
    private final AtomicLong kvBytesBudget = new AtomicLong();
    private final AtomicLong sessionsCached = new AtomicLong();
    private final AtomicLong handlersActive = new AtomicLong();
    private final AtomicLong poolSlotsInUse = new AtomicLong();
    private final AtomicLong poolSlots = new AtomicLong();
    private final AtomicLong poolBytes = new AtomicLong();
    /** Whether the pool's gauges are registered: on the first report, from the scheduler's thread alone. */
    private boolean poolGauges;

    private final VllmMetrics vllm = new VllmMetrics(registry.getPrometheusRegistry(), running::get, queued::get);

    public ServerMetrics() {
        promptTokens = Counter.builder("glimmer.prompt.tokens")
                .description("prompt tokens processed (not from cache)")
                .register(registry);
        promptTokensCached = Counter.builder("glimmer.prompt.tokens.cached")
                .description("prompt tokens taken from a cached KV prefix")
                .register(registry);
        generatedTokens = Counter.builder("glimmer.tokens.predicted")
                .description("tokens generated")
                .register(registry);
        cancelledRequests = Counter.builder("glimmer.requests.cancelled")
                .description("generations stopped because the client disconnected")
                .register(registry);
        speculativeSteps = Counter.builder("glimmer.speculative.steps")
                .description("decode steps that drafted tokens with the NextN block and verified them")
                .register(registry);
        draftTokens = Counter.builder("glimmer.draft.tokens")
                .description("tokens drafted by speculative steps")
                .register(registry);
        draftTokensAccepted = Counter.builder("glimmer.draft.tokens.accepted")
                .description("drafted tokens accepted: generated without a step of their own")
                .register(registry);
        timeToFirstToken = Timer.builder("glimmer.time.to.first.token")
                .description("request arrival to first token")
                .publishPercentileHistogram()
                .register(registry);
        interTokenLatency = Timer.builder("glimmer.inter.token.latency")
                .description("time between generated tokens")
                .publishPercentileHistogram()
                .register(registry);
        promptSpeed = DistributionSummary.builder("glimmer.prompt.tokens.per.second")
                .description("prompt processing speed per request")
                .register(registry);
        generationSpeed = DistributionSummary.builder("glimmer.predicted.tokens.per.second")
                .description("generation speed per request")
                .register(registry);
        decodeBatch = DistributionSummary.builder("glimmer.decode.batch.size")
                .description("sequences decoded together per forward step")
                .register(registry);
        promptBatch = DistributionSummary.builder("glimmer.prompt.batch.size")
                .description("sequences whose prompts ran together per prompt pass")
                .register(registry);
        decodeStep = Timer.builder("glimmer.decode.step")
                .description("decode steps, from launch to results")
                .register(registry);
        decodeGap = Timer.builder("glimmer.decode.gap")
                .description(
                        "host time between a decode step's results and the next step's launch (no prompt chunk between)")
                .register(registry);
        gauge("glimmer.requests.processing", running, "requests being generated");
        gauge("glimmer.requests.deferred", queued, "requests waiting for a slot");
        gauge("glimmer.http.handlers.active", handlersActive, "HTTP handlers that have not returned yet");
        gauge("glimmer.kv.cache.used.bytes", kvBytesUsed, "KV cache memory held by sessions");
        gauge("glimmer.kv.cache.budget.bytes", kvBytesBudget, "KV cache memory budget");
        gauge("glimmer.sessions.cached", sessionsCached, "conversations whose KV cache is kept");
        new JvmMemoryMetrics().bindTo(registry);
        gcMetrics.bindTo(registry);
        new JvmThreadMetrics().bindTo(registry);
        new ClassLoaderMetrics().bindTo(registry);
        new ProcessorMetrics().bindTo(registry);
    }

    /** Counts one finished HTTP request by route pattern and status. */
    public void request(String route, int status) {
        Counter.builder("glimmer.http.requests")
                .description("HTTP requests by route and status")
                .tag("route", route)
                .tag("status", Integer.toString(status))
                .register(registry)
                .increment();
    }

    /** A chunk of {@code tokens} prompt tokens was processed (counted even if the request is cancelled later). */
    public void promptChunk(int tokens) {
        promptTokens.increment(tokens);
    }

    /** A prompt pass ran the prompts of {@code sequences} sequences together. */
    public void promptPass(int sequences) {
        promptBatch.record(sequences);
    }

    /**
     * The served model is loaded: its id labels the vLLM-named series, which appear now.
     *
     * @param slots conversations its KV memory holds at once, each of {@code ctx} tokens
     */
    public void modelLoaded(String modelId, int ctx, long slots) {
        vllm.modelLoaded(modelId, ctx, slots);
    }

    /** A prompt is done: {@code processed} tokens computed in {@code duration}, {@code cached} taken from a cache. */
    public void promptDone(int processed, int cached, Duration duration) {
        promptTokensCached.increment(cached);
        vllm.prompt(processed + cached, cached);
        if (processed > 0 && duration.toNanos() > 0) {
            promptSpeed.record(processed * 1e9 / duration.toNanos());
        }
    }

    /**
     * A request started with {@code tokens} prompt tokens whose KV rows came from {@code source} instead of being
     * computed: {@code conversation} (copied from another conversation's cache), {@code ram} or {@code disk} (a tier).
     */
    public void prefixHit(String source, int tokens) {
        Counter.builder("glimmer.prefix.hits")
                .description("requests that took a prompt prefix from another cache")
                .tag("source", source)
                .register(registry)
                .increment();
        Counter.builder("glimmer.prefix.tokens.saved")
                .description("prompt tokens taken from another cache, not computed")
                .tag("source", source)
                .register(registry)
                .increment(tokens);
    }

    public void generation(int tokens, Duration duration) {
        if (tokens > 0 && duration.toNanos() > 0) {
            generationSpeed.record(tokens * 1e9 / duration.toNanos());
        }
    }

    /** A token after a sequence's first, {@code sincePrevious} after the one before it. */
    public void token(Duration sincePrevious) {
        generatedTokens.increment();
        interTokenLatency.record(sincePrevious);
        vllm.token(sincePrevious);
    }

    /** A sequence's first token, {@code sinceArrival} after its request came in. */
    public void firstToken(Duration sinceArrival) {
        generatedTokens.increment();
        timeToFirstToken.record(sinceArrival);
        vllm.firstToken(sinceArrival);
    }

    /** One decode step fed {@code sequences} tokens at once and took {@code took} from its launch to its results. */
    public void decodeStep(int sequences, Duration took) {
        decodeBatch.record(sequences);
        decodeStep.record(took);
    }

    /** A speculative step drafted {@code drafted} tokens, of which {@code accepted} were accepted. */
    public void speculativeStep(int drafted, int accepted) {
        speculativeSteps.increment();
        draftTokens.increment(drafted);
        draftTokensAccepted.increment(accepted);
        vllm.speculativeStep(drafted, accepted);
    }

    /**
     * The device waited {@code gap} for the host between two decode steps: what serving adds to the engine's step
     * (in {@code bench}, steps follow each other back to back).
     */
    public void decodeGap(Duration gap) {
        decodeGap.record(gap);
    }

    /** A request ended, {@code sinceArrival} after it came in, for {@code reason}; null when it failed. */
    public void requestEnded(FinishReason reason, Duration sinceArrival) {
        // vLLM's finished_reason values: stop, length, abort (a client that left, or a failure).
        String vllmReason = switch (reason) {
            case STOP -> "stop";
            case LENGTH -> "length";
            case CANCELLED -> "abort";
            case null -> "abort";
        };
        vllm.finished(vllmReason, sinceArrival);
    }

    public void cancelled() {
        cancelledRequests.increment();
    }

    public void running(int n) {
        running.set(n);
    }

    public void queued(int n) {
        queued.set(n);
    }

    /** A handler starts ({@code +1}) or returns ({@code -1}). */
    public void handlers(int delta) {
        handlersActive.addAndGet(delta);
    }

    public void kvCache(long usedBytes, long budgetBytes, int sessions) {
        kvBytesUsed.set(usedBytes);
        kvBytesBudget.set(budgetBytes);
        sessionsCached.set(sessions);
    }

    /**
     * The GPU backend's pool of sequences: {@code slotsInUse} of its {@code slots} hold a cached conversation, and it
     * holds {@code bytes} (its KV pool and working buffers). Its gauges appear with the first report: a CPU server,
     * whose caches are memory of their own, has none.
     */
    public void kvPool(int slotsInUse, int slots, long bytes) {
        poolSlotsInUse.set(slotsInUse);
        poolSlots.set(slots);
        poolBytes.set(bytes);
        if (!poolGauges) {
            poolGauges = true;
            gauge(
                    "glimmer.kv.pool.slots.used",
                    poolSlotsInUse,
                    "slots of the GPU's KV pool that hold a cached conversation");
            gauge("glimmer.kv.pool.slots", poolSlots, "slots of the GPU's KV pool");
            gauge("glimmer.kv.pool.bytes", poolBytes, "memory of the GPU's KV pool and its working buffers");
        }
    }

    private void gauge(String name, AtomicLong value, String description) {
        Gauge.builder(name, value, AtomicLong::get).description(description).register(registry);
    }

    public String scrape() {
        return registry.scrape(CONTENT_TYPE);
    }

    @Override
    public void close() {
        gcMetrics.close();
        registry.close();
    }
}
