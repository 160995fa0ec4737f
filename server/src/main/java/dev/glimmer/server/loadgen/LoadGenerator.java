package dev.glimmer.server.loadgen;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import dev.glimmer.server.http.Json;
import java.io.IOException;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;

/**
 * Runs a load test against an OpenAI-compatible server: finds the model name, sends one warm-up request
 * (which also tells how many tokens the server makes of the prompt words), then sends the measured requests
 * from {@code concurrency} clients, each sending its next request as soon as its last one ended, until
 * {@code requests} have been sent. See docs/BENCHMARKS.md.
 */
public final class LoadGenerator {
    /**
     * The warm-up asks for at most this many tokens: it is there to open a connection, wake the server and
     * have the client's own reading code compiled before anything is timed.
     */
    static final int WARMUP_MAX_TOKENS = 64;
    /** The warm-up prompt's words at most: the sample that calibrates the measured prompts' length. */
    static final int WARMUP_WORDS = 256;
    /** The {@link PromptText} index of the text every prompt starts with under {@code --shared-prefix} (the warm-up is -1). */
    static final int SHARED_PREFIX = -2;
    /** The model name sent when the server lists none (llama-server and vLLM accept any). */
    static final String FALLBACK_MODEL = "default";

    private LoadGenerator() {}

    /**
     * Runs the test; {@code progress} gets a few lines on what is being done. Never throws for a server that
     * is down, slow or wrong: those are the report's errors.
     */
    public static LoadReport run(LoadSettings settings, Consumer<String> progress) {
        try (HttpClient client = HttpClient.newBuilder()
                        .version(HttpClient.Version.HTTP_1_1)
                        .connectTimeout(settings.timeout())
                        .build();
                Watchdog watchdog = new Watchdog(settings.timeout())) {
            String model = settings.model().orElseGet(() -> listedModel(client, settings, watchdog, progress));
            StreamedCompletion completion = new StreamedCompletion(client, settings, watchdog);

            progress.accept("warm-up: one request to " + model);
            // A short sample of the text: enough words to tell how many tokens a word is in the server's tokenizer
            // (one or two in a real vocabulary, five in a random one), few enough to fit any context the measured
            // prompts fit in, and quick to compute.
            int warmupWords = Math.max(1, Math.min(settings.promptTokens() / 8, WARMUP_WORDS));
            RequestResult warmup = completion.run(
                    model,
                    PromptText.of(settings.seed(), -1, warmupWords),
                    Math.min(settings.maxTokens(), WARMUP_MAX_TOKENS));
            if (!warmup.ok()) {
                return LoadReport.of(settings, model, warmup, new RequestResult[0], warmup.sentNanos());
            }
            int words = promptWords(settings.promptTokens(), warmupWords, warmup.promptTokens());
            int sharedWords = (int) Math.round((double) words * settings.sharedPrefix() / settings.promptTokens());
            String shared = sharedWords == 0 ? "" : PromptText.of(settings.seed(), SHARED_PREFIX, sharedWords) + " ";

            progress.accept("sending " + settings.requests() + " requests, " + settings.concurrency() + " at a time ("
                    + words + " words ≈ " + settings.promptTokens() + " prompt tokens"
                    + (sharedWords > 0 ? ", the first " + sharedWords + " words the same in every one" : "") + ", "
                    + settings.maxTokens() + " output tokens each)");
            RequestResult[] results = new RequestResult[settings.requests()];
            AtomicInteger next = new AtomicInteger();
            AtomicInteger ended = new AtomicInteger();
            AtomicInteger failed = new AtomicInteger();
            // About ten progress lines whatever the number of requests.
            int progressStep = Math.max(1, (results.length + 9) / 10);
            long start = System.nanoTime();
            try (ExecutorService clients = Executors.newVirtualThreadPerTaskExecutor()) {
                for (int c = 0; c < Math.min(settings.concurrency(), settings.requests()); c++) {
                    clients.submit(() -> {
                        for (int i = next.getAndIncrement(); i < results.length; i = next.getAndIncrement()) {
                            RequestResult result = completion.run(
                                    model,
                                    shared + PromptText.of(settings.seed(), i, Math.max(1, words - sharedWords)),
                                    settings.maxTokens());
                            results[i] = result;
                            if (!result.ok()) {
                                failed.incrementAndGet();
                            }
                            // Read after ending: the line of the last request counts every failure.
                            int count = ended.incrementAndGet();
                            if (count % progressStep == 0 || count == results.length) {
                                progress.accept(count + " of " + results.length + " requests ended, " + failed.get()
                                        + " failed");
                            }
                        }
                    });
                }
            }
            return LoadReport.of(settings, model, warmup, results, start);
        }
    }

    /**
     * How many words make about {@code promptTokens} tokens, given that the server counted
     * {@code sampleWords} words as {@code sampleTokens} tokens (-1: it did not say; then a word is taken
     * for a token).
     */
    static int promptWords(int promptTokens, int sampleWords, int sampleTokens) {
        if (sampleTokens <= 0) {
            return promptTokens;
        }
        double tokensPerWord = sampleTokens / (double) sampleWords;
        return Math.max(1, (int) Math.round(promptTokens / tokensPerWord));
    }

    /** The first model of {@code GET /v1/models}, or {@link #FALLBACK_MODEL} when there is none to read. */
    private static String listedModel(
            HttpClient client, LoadSettings settings, Watchdog watchdog, Consumer<String> progress) {
        HttpRequest.Builder request = HttpRequest.newBuilder(settings.resolve("/v1/models"));
        settings.apiKey().ifPresent(key -> request.header("Authorization", "Bearer " + key));
        String why;
        try (Watchdog.Watch watch = watchdog.watch()) {
            try {
                HttpResponse<String> response = client.send(request.build(), HttpResponse.BodyHandlers.ofString());
                JsonNode id = response.statusCode() != 200
                        ? null
                        : Json.MAPPER
                                .readTree(response.body())
                                .path("data")
                                .path(0)
                                .path("id");
                if (id != null && id.isTextual() && !id.textValue().isBlank()) {
                    progress.accept("model: " + id.textValue() + " (the first of GET /v1/models)");
                    return id.textValue();
                }
                why = id == null ? "HTTP " + response.statusCode() : "it lists no model";
            } catch (JsonProcessingException e) {
                why = "the answer is not JSON";
            } catch (IOException | InterruptedException e) {
                if (watch.fired()) {
                    why = "the server sent nothing for " + settings.timeout().toSeconds() + " s (--timeout)";
                } else if (e instanceof IOException io) {
                    why = StreamedCompletion.describe(io, settings.resolve("/v1/models"), settings.timeout());
                } else {
                    Thread.currentThread().interrupt();
                    why = "interrupted";
                }
            }
        }
        progress.accept("model: " + FALLBACK_MODEL + " (GET /v1/models: " + StreamedCompletion.oneLine(why) + ")");
        return FALLBACK_MODEL;
    }
}
