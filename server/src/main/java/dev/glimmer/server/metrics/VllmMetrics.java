package dev.glimmer.server.metrics;

import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.core.metrics.Histogram;
import io.prometheus.metrics.core.metrics.Info;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.time.Duration;
import java.util.function.DoubleSupplier;

/**
 * The serving metrics under vLLM's names ({@code vllm:*}), beside Glimmer's own, so that what reads a vLLM server
 * reads Glimmer too: the Gateway API Inference Extension's endpoint picker (queue, running requests, KV-cache use,
 * cache configuration; it assumes vLLM when a pod has no engine label) and vLLM's Grafana dashboards (time to first
 * token, inter-token latency, tokens, finished requests). docs/SCALE_OUT.md lists each name with its source.
 *
 * <p>They are written with the Prometheus client itself rather than through Micrometer, whose naming convention
 * would rewrite them (units appended, its own histogram buckets); the histograms keep vLLM's bucket bounds so
 * that queries written for vLLM compare like with like. Every series carries vLLM's {@code model_name} label;
 * nothing is exported before the model is loaded ({@link #modelLoaded}). No exemplars: they would need the
 * client's tracer module, which Micrometer leaves out.
 */
final class VllmMetrics {
    /** The label vLLM puts on every series. */
    static final String MODEL_LABEL = "model_name";
    /**
     * The tokens of one KV "block" as reported in {@code vllm:cache_config_info}. Glimmer's KV memory is one slot of
     * the full context per conversation, and it reuses a cached prefix of any length, so any block size describes it
     * truly; 16 (vLLM's default) lets a prefix-aware picker hash prompts at the grain it is tuned for.
     */
    static final int BLOCK_TOKENS = 16;

    /** vLLM's bounds for the time to first token, in seconds. */
    private static final double[] TTFT_BOUNDS = {
        0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
        160.0, 640.0, 2560.0
    };
    /** vLLM's bounds for the inter-token latency, in seconds. */
    private static final double[] ITL_BOUNDS = {
        0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0
    };
    /** vLLM's bounds for a request's end-to-end latency, in seconds. */
    private static final double[] E2E_BOUNDS = {
        0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0,
        1920.0, 7680.0
    };

    private final PrometheusRegistry registry;
    private final DoubleSupplier running;
    private final DoubleSupplier waiting;
    /** The served model's id, the value of {@link #MODEL_LABEL}; null until it is loaded. */
    private volatile String model;

    private Counter prefixQueries;
    private Counter prefixHits;
    private Counter promptTokens;
    private Counter generationTokens;
    private Counter finished;
    private Counter specDecodeDrafts;
    private Counter specDecodeDraftTokens;
    private Counter specDecodeAcceptedTokens;
    private Histogram timeToFirstToken;
    private Histogram interTokenLatency;
    private Histogram e2eLatency;

    /**
     * @param running requests being generated now
     * @param waiting requests accepted and waiting for a slot
     */
    VllmMetrics(PrometheusRegistry registry, DoubleSupplier running, DoubleSupplier waiting) {
        this.registry = registry;
        this.running = running;
        this.waiting = waiting;
    }

    /**
     * Registers the metrics once the model is known.
     *
     * @param slots conversations the KV memory holds at once, each a full context of {@code ctx} tokens
     */
    synchronized void modelLoaded(String modelId, int ctx, long slots) {
        if (model != null) {
            throw new IllegalStateException("the vLLM metrics are registered once, for the one served model");
        }
        gauge("vllm:num_requests_running", "requests being generated", modelId, running);
        gauge("vllm:num_requests_waiting", "requests accepted and waiting for a slot", modelId, waiting);
        // A running request pins one slot of the KV memory whatever its length. Idle cached conversations are
        // evicted on demand: like vLLM's cached blocks that no request holds, they count as free.
        gauge(
                "vllm:kv_cache_usage_perc",
                "fraction of the KV memory pinned by running requests (0 to 1)",
                modelId,
                () -> Math.min(1.0, running.getAsDouble() / slots));
        long blocks = slots * (ctx / BLOCK_TOKENS);
        Info cacheConfig = Info.builder()
                .name("vllm:cache_config")
                .help("the KV cache: tokens per block, blocks in all, prefix reuse")
                .labelNames(MODEL_LABEL, "block_size", "num_gpu_blocks", "enable_prefix_caching")
                .build();
        cacheConfig.setLabelValues(modelId, Integer.toString(BLOCK_TOKENS), Long.toString(blocks), "True");
        registry.register(cacheConfig);
        prefixQueries = counter("vllm:prefix_cache_queries", "prompt tokens looked up in the prefix cache");
        prefixHits = counter("vllm:prefix_cache_hits", "prompt tokens found in the prefix cache");
        promptTokens = counter("vllm:prompt_tokens", "prompt tokens of the requests whose prompt was done");
        generationTokens = counter("vllm:generation_tokens", "tokens generated");
        specDecodeDrafts = counter("vllm:spec_decode_num_drafts", "speculative steps");
        specDecodeDraftTokens = counter("vllm:spec_decode_num_draft_tokens", "tokens drafted");
        specDecodeAcceptedTokens = counter("vllm:spec_decode_num_accepted_tokens", "drafted tokens accepted");
        finished = Counter.builder()
                .name("vllm:request_success")
                .help("requests ended, by why")
                .labelNames(MODEL_LABEL, "finished_reason")
                .withoutExemplars()
                .build();
        registry.register(finished);
        timeToFirstToken = histogram(
                "vllm:time_to_first_token_seconds", "from a request's arrival to its first token", TTFT_BOUNDS);
        interTokenLatency =
                histogram("vllm:inter_token_latency_seconds", "between two tokens of a request", ITL_BOUNDS);
        e2eLatency = histogram("vllm:e2e_request_latency_seconds", "from a request's arrival to its end", E2E_BOUNDS);
        model = modelId;
    }

    /** A prompt of {@code tokens} was looked up in the prefix cache and {@code cached} of them were found there. */
    void prompt(int tokens, int cached) {
        if (model != null) {
            prefixQueries.labelValues(model).inc(tokens);
            prefixHits.labelValues(model).inc(cached);
            promptTokens.labelValues(model).inc(tokens);
        }
    }

    void firstToken(Duration sinceArrival) {
        if (model != null) {
            generationTokens.labelValues(model).inc();
            timeToFirstToken.labelValues(model).observe(seconds(sinceArrival));
        }
    }

    void token(Duration sincePrevious) {
        if (model != null) {
            generationTokens.labelValues(model).inc();
            interTokenLatency.labelValues(model).observe(seconds(sincePrevious));
        }
    }

    void speculativeStep(int drafted, int accepted) {
        if (model != null) {
            specDecodeDrafts.labelValues(model).inc();
            specDecodeDraftTokens.labelValues(model).inc(drafted);
            specDecodeAcceptedTokens.labelValues(model).inc(accepted);
        }
    }

    /** A request ended: {@code reason} is vLLM's {@code finished_reason} (stop, length, abort). */
    void finished(String reason, Duration sinceArrival) {
        if (model != null) {
            finished.labelValues(model, reason).inc();
            e2eLatency.labelValues(model).observe(seconds(sinceArrival));
        }
    }

    private void gauge(String name, String help, String modelId, DoubleSupplier value) {
        registry.register(GaugeWithCallback.builder()
                .name(name)
                .help(help)
                .labelNames(MODEL_LABEL)
                .callback(cb -> cb.call(value.getAsDouble(), modelId))
                .build());
    }

    private Counter counter(String name, String help) {
        Counter c = Counter.builder()
                .name(name)
                .help(help)
                .labelNames(MODEL_LABEL)
                .withoutExemplars()
                .build();
        registry.register(c);
        return c;
    }

    private Histogram histogram(String name, String help, double[] bounds) {
        Histogram h = Histogram.builder()
                .name(name)
                .help(help)
                .labelNames(MODEL_LABEL)
                .classicUpperBounds(bounds)
                .classicOnly()
                .withoutExemplars()
                .build();
        registry.register(h);
        return h;
    }

    private static double seconds(Duration d) {
        return d.toNanos() / 1e9;
    }
}
