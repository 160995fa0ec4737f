package dev.glimmer.server.cli;

import dev.glimmer.server.http.Json;
import dev.glimmer.server.loadgen.LoadGenerator;
import dev.glimmer.server.loadgen.LoadReport;
import dev.glimmer.server.loadgen.LoadSettings;
import java.time.Duration;
import java.util.Optional;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code ./glimmer bench-serve}: a load generator for any OpenAI-compatible server (Glimmer, llama-server,
 * vLLM, …). Parses its options into {@link LoadSettings}; the work is {@link LoadGenerator}'s.
 */
@Command(
        name = "bench-serve",
        description =
                "load-test an OpenAI-compatible server: aggregate tok/s, time to first token, inter-token latency",
        footer = """
                Each request is a streaming POST /v1/completions: greedy (temperature 0), max_tokens K with
                ignore_eos (accepted by Glimmer, llama-server and vLLM, so every request generates K tokens), and
                stream_options.include_usage (so the server counts the tokens). Prompts are sentences of random
                common words made from --seed, different for every request so that no server can reuse a cache
                across requests; P is approximate: the words per token are taken from the server's count of a
                first, unmeasured warm-up request, and the report gives the server's own prompt token count.
                Each of N clients sends its next request when its last one ends, until M have been sent.
                Reported: requests completed and failed (with the first failure's reason), prompt and output
                tokens, output tok/s (all output tokens over the wall time from the first request sent to the last
                byte received), requests/s, time to first token and inter-token latency (the gaps between the
                events with text of one request), each as p50 and p99.
                Exit code 0 when every request completed, 1 when any failed (the report says why).
                Example: ./glimmer bench-serve --url http://127.0.0.1:8080 --concurrency 4 --requests 16 \\
                             --prompt-tokens 512 --max-tokens 128""")
final class BenchServeCommand implements Subcommand {
    private static final int DEFAULT_CONCURRENCY = 1;
    private static final int DEFAULT_PROMPT_TOKENS = 128;
    private static final int DEFAULT_MAX_TOKENS = 128;
    private static final int DEFAULT_TIMEOUT_SECONDS = 600;
    private static final long DEFAULT_SEED = 42;

    @Option(
            names = "--url",
            paramLabel = "U",
            required = true,
            description = "the server, e.g. http://127.0.0.1:8080 (a trailing /v1 is fine)")
    String url;

    @Option(
            names = "--concurrency",
            paramLabel = "N",
            description = "requests in flight at once (default " + DEFAULT_CONCURRENCY + ")")
    int concurrency = DEFAULT_CONCURRENCY;

    @Option(names = "--requests", paramLabel = "M", description = "requests measured (default: 4 × concurrency)")
    Integer requests;

    @Option(
            names = "--prompt-tokens",
            paramLabel = "P",
            description = "about how many tokens each prompt has (default " + DEFAULT_PROMPT_TOKENS + ")")
    int promptTokens = DEFAULT_PROMPT_TOKENS;

    @Option(
            names = "--shared-prefix",
            paramLabel = "N",
            description = "of each prompt's tokens, about N are the same text in every prompt (an agent's system"
                    + " prompt: what prefix sharing saves); default 0, every prompt its own from the first word")
    int sharedPrefix;

    @Option(
            names = "--max-tokens",
            paramLabel = "K",
            description = "tokens each request generates (default " + DEFAULT_MAX_TOKENS + ")")
    int maxTokens = DEFAULT_MAX_TOKENS;

    @Option(
            names = "--model",
            paramLabel = "NAME",
            description = "the model name sent (default: the first of GET /v1/models, else 'default')")
    String model;

    @Option(names = "--api-key", paramLabel = "KEY", description = "sent as Authorization: Bearer KEY")
    String apiKey;

    @Option(
            names = "--timeout",
            paramLabel = "S",
            description = "seconds the server may stay silent before a request fails (default "
                    + DEFAULT_TIMEOUT_SECONDS + ")")
    long timeoutSeconds = DEFAULT_TIMEOUT_SECONDS;

    @Option(
            names = "--seed",
            paramLabel = "S",
            description = "makes the prompts' text (default " + DEFAULT_SEED
                    + "; the same seed sends the same prompts to every server)")
    long seed = DEFAULT_SEED;

    @Option(names = "--json", description = "print the report as one JSON object")
    boolean json;

    @Override
    public int run(Terminal io) throws Exception {
        LoadSettings settings = new LoadSettings(
                LoadSettings.parseUrl(url),
                nonEmpty(model),
                nonEmpty(apiKey),
                concurrency,
                requests != null ? requests : 4 * Math.max(1, concurrency),
                promptTokens,
                maxTokens,
                Duration.ofSeconds(timeoutSeconds),
                seed,
                sharedPrefix);
        LoadReport report = LoadGenerator.run(settings, line -> io.err().println("bench-serve: " + line));
        io.out().print(json ? Json.write(report.toJson()) + "\n" : report.toTable());
        io.out().flush();
        if (report.errors() > 0) {
            io.err()
                    .println("glimmer bench-serve: "
                            + (report.warmupFailed()
                                    ? report.firstError()
                                    : report.errors() + " of " + report.requests() + " requests failed; the first: "
                                            + report.firstError()));
            return 1;
        }
        return 0;
    }

    /** The settings' optional strings: an empty value counts as not given. */
    private static Optional<String> nonEmpty(String value) {
        return Optional.ofNullable(value).filter(v -> !v.isBlank());
    }
}
