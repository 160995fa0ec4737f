package dev.glimmer.server.config;

import dev.glimmer.engine.backend.BackendKind;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

/**
 * Everything {@code ./glimmer serve} is configured with, after application.yaml, GLIMMER_*
 * environment variables and CLI flags were merged and checked ({@link ServerConfigLoader}).
 *
 * @param host         the address to bind
 * @param port         the port; 0 picks a free one
 * @param apiKeys      when any, every route but /health and the web chat's files needs one of them
 *                     ({@code Authorization: Bearer <key>} or {@code x-api-key}); a stored Response is
 *                     visible only with the key that created it
 * @param allowedHosts names besides the loopback ones that the {@code Host} header may give
 *                     ({@code *}: any); see {@code HostFilter}
 * @param corsOrigins  the pages of other origins that may call the server: origins, {@code local} (pages
 *                     served from this machine, the default), {@code *} (any); empty allows none ({@code CorsFilter})
 * @param maxBodyBytes the largest request body accepted (larger: 413)
 * @param model        the GGUF file; empty serves the demo model
 * @param backend      what {@code --backend} asks for: one of {@link BackendKind#SERVING}
 * @param ctx          the context length asked for in tokens (capped at the model's own); 0 = the model's own,
 *                     at most {@link #DEFAULT_CTX}
 * @param threads      worker threads for the math; 0 = one per physical core
 * @param parallel     sequences decoded together in one forward step
 * @param promptChunk  prompt tokens processed per forward step (a client that left is noticed within one)
 * @param queue        requests that may wait for a slot
 * @param kvBudgetMb   memory for cached KV caches in MB; 0 = sized from the context
 * @param gpuMemoryGb  GPU memory the server may take in GB, weights included; 0 = what the device has free
 * @param cacheTiers   where conversations evicted from the KV budget go
 * @param drafts       speculative decoding with the model's NextN block (docs/SPECULATIVE.md)
 * @param sampling     defaults for requests that do not say
 * @param drainSeconds how long SIGTERM lets running requests finish before the server stops
 */
public record ServerConfig(
        String host,
        int port,
        List<String> apiKeys,
        List<String> allowedHosts,
        List<String> corsOrigins,
        long maxBodyBytes,
        Optional<Path> model,
        BackendKind backend,
        int ctx,
        int threads,
        int parallel,
        int promptChunk,
        int queue,
        long kvBudgetMb,
        long gpuMemoryGb,
        SamplingDefaults sampling,
        CacheTiers cacheTiers,
        Drafts drafts,
        int drainSeconds) {

    /** The context served when none is asked for and the model's own is longer. */
    public static final int DEFAULT_CTX = 8192;
    /** The shortest and longest context one may ask for. */
    public static final int MIN_CTX = 16;

    public static final int MAX_CTX = 1 << 24;

    /** Sampling values used when a request leaves them out; {@code maxTokens} -1 = until the context is full. */
    public record SamplingDefaults(float temperature, int topK, float topP, float minP, int maxTokens) {}

    /**
     * The RAM and disk tiers of the KV cache (docs/SERVING.md): host memory for evicted conversations ({@code ramMb}),
     * then files in {@code dir} within {@code diskMb}; 0 turns a tier off.
     */
    public record CacheTiers(long ramMb, Path dir, long diskMb) {}

    /**
     * {@code --draft} and {@code --draft-tokens}: whether decode steps draft tokens with the model's NextN (MTP) block,
     * and how many per step (1 or 2).
     */
    public record Drafts(DraftMode mode, int tokens) {}

    /** What {@code --draft} asks for. */
    public enum DraftMode {
        /** {@link #MTP} where the model has the NextN block and the backend drafts, {@link #NONE} otherwise. */
        AUTO,
        /** Draft with the NextN block; a model without one, or a backend that does not draft, cannot be served so. */
        MTP,
        /** Plain decode steps. */
        NONE
    }

    public ServerConfig {
        apiKeys = List.copyOf(apiKeys);
        allowedHosts = List.copyOf(allowedHosts);
        corsOrigins = List.copyOf(corsOrigins);
    }
}
