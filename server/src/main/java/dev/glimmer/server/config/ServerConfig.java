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
 * @param apiKey       when present, every route but /health needs {@code Authorization: Bearer <key>}
 * @param corsOrigins  origins allowed by CORS ({@code *} allows any); empty turns CORS off
 * @param maxBodyBytes the largest request body accepted (larger: 413)
 * @param model        the GGUF file; empty serves the demo model
 * @param backend      what {@code --backend} asks for: one of {@link BackendKind#SERVING}
 * @param ctx          the context length in tokens
 * @param threads      worker threads for the math; 0 = one per available core
 * @param parallel     sequences decoded together in one forward step
 * @param promptChunk  prompt tokens processed per forward step (a client that left is noticed within one)
 * @param queue        requests that may wait for a slot
 * @param kvBudgetMb   memory for cached KV caches in MB; 0 = sized from the context
 * @param sampling     defaults for requests that do not say
 * @param drainSeconds how long SIGTERM lets running requests finish before the server stops
 */
public record ServerConfig(String host, int port, Optional<String> apiKey, List<String> corsOrigins, long maxBodyBytes,
                           Optional<Path> model, BackendKind backend, int ctx, int threads, int parallel, int promptChunk, int queue,
                           long kvBudgetMb, SamplingDefaults sampling, int drainSeconds) {

    /** Sampling values used when a request leaves them out; {@code maxTokens} -1 = until the context is full. */
    public record SamplingDefaults(float temperature, int topK, float topP, float minP, int maxTokens) {
    }

    public ServerConfig {
        corsOrigins = List.copyOf(corsOrigins);
    }

    public boolean corsEnabled() {
        return !corsOrigins.isEmpty();
    }
}
