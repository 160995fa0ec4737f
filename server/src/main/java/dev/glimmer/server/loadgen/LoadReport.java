package dev.glimmer.server.loadgen;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.glimmer.server.http.Json;
import java.util.Arrays;
import java.util.Comparator;
import java.util.Locale;
import java.util.stream.IntStream;
import java.util.stream.Stream;

/**
 * The figures of one load test. Throughput counts the measured requests that succeeded, over the wall time
 * from the first request sent to the last byte received; latencies are over those requests too.
 *
 * @param url                  the server
 * @param model                the model name sent
 * @param concurrency          requests in flight at once
 * @param requests             requests asked for
 * @param promptTokensAsked    the approximate prompt length asked for
 * @param maxTokens            the tokens each request asked for
 * @param completed            requests that streamed to their end
 * @param errors               requests that failed (or 1 for a failed warm-up, after which nothing was sent)
 * @param firstError           the reason of the first failure in time, on one line; null when none failed
 * @param wallSeconds          from the first request sent to the last byte received
 * @param promptTokens         the prompt tokens of the completed requests as the server counted them; -1 when
 *                             a completed request did not report usage
 * @param outputTokens         the tokens the completed requests generated (the server's count, or else the
 *                             number of events with text)
 * @param usageReported        whether every completed request reported the server's token counts (false
 *                             when none completed)
 * @param timeToFirstToken     from a request's sending to its first text, in ms
 * @param interTokenLatency    between two consecutive events with text of one request, in ms
 * @param warmupPromptTokens   the warm-up's prompt tokens as the server counted them; -1 when not reported
 * @param warmupOutputTokens   the warm-up's generated tokens (-1 when it failed)
 */
public record LoadReport(
        String url,
        String model,
        int concurrency,
        int requests,
        int promptTokensAsked,
        int maxTokens,
        int completed,
        int errors,
        String firstError,
        double wallSeconds,
        long promptTokens,
        long outputTokens,
        boolean usageReported,
        Latency timeToFirstToken,
        Latency interTokenLatency,
        int warmupPromptTokens,
        int warmupOutputTokens) {

    /** The median and the 99th percentile (nearest rank) of some times, in ms; NaN when there were none. */
    public record Latency(double p50, double p99) {
        static Latency of(long[] nanos) {
            if (nanos.length == 0) {
                return new Latency(Double.NaN, Double.NaN);
            }
            long[] sorted = nanos.clone();
            Arrays.sort(sorted);
            return new Latency(percentile(sorted, 50), percentile(sorted, 99));
        }

        private static double percentile(long[] sorted, int p) {
            int rank = (int) Math.ceil(p / 100.0 * sorted.length);
            return sorted[Math.max(0, rank - 1)] / 1e6;
        }
    }

    /** The report of {@code results} (null entries were never sent), measured from {@code startNanos}. */
    static LoadReport of(
            LoadSettings settings, String model, RequestResult warmup, RequestResult[] results, long startNanos) {
        RequestResult[] sent = Stream.of(results).filter(r -> r != null).toArray(RequestResult[]::new);
        RequestResult[] done = Stream.of(sent).filter(RequestResult::ok).toArray(RequestResult[]::new);
        String firstError;
        int errors;
        if (!warmup.ok()) {
            firstError = "the warm-up request failed, nothing was measured: " + warmup.error();
            errors = 1;
        } else {
            errors = sent.length - done.length;
            firstError = Stream.of(sent)
                    .filter(r -> !r.ok())
                    .min(Comparator.comparingLong(RequestResult::endNanos))
                    .map(RequestResult::error)
                    .orElse(null);
        }
        long lastByte = Stream.of(sent).mapToLong(RequestResult::endNanos).max().orElse(startNanos);
        boolean usage = done.length > 0 && Stream.of(done).allMatch(RequestResult::reportedUsage);
        long promptTokens =
                usage ? Stream.of(done).mapToLong(RequestResult::promptTokens).sum() : -1;
        long outputTokens =
                Stream.of(done).mapToLong(RequestResult::generatedTokens).sum();
        long[] firstToken = Stream.of(done)
                .filter(r -> r.contentNanos().length > 0)
                .mapToLong(r -> r.contentNanos()[0] - r.sentNanos())
                .toArray();
        long[] gaps = Stream.of(done)
                .flatMapToLong(r -> {
                    long[] t = r.contentNanos();
                    return IntStream.range(1, t.length).mapToLong(i -> t[i] - t[i - 1]);
                })
                .toArray();
        return new LoadReport(
                settings.baseUrl().toString(),
                model,
                settings.concurrency(),
                settings.requests(),
                settings.promptTokens(),
                settings.maxTokens(),
                done.length,
                errors,
                firstError,
                (lastByte - startNanos) / 1e9,
                promptTokens,
                outputTokens,
                usage,
                Latency.of(firstToken),
                Latency.of(gaps),
                warmup.promptTokens(),
                warmup.ok() ? warmup.generatedTokens() : -1);
    }

    /** Whether the warm-up request failed, so that no request was measured. */
    public boolean warmupFailed() {
        return warmupOutputTokens < 0;
    }

    /** Generated tokens per second of wall time, all requests together; NaN when nothing completed. */
    public double outputTokensPerSecond() {
        return completed == 0 ? Double.NaN : outputTokens / wallSeconds;
    }

    /** Completed requests per second of wall time; NaN when nothing completed. */
    public double requestsPerSecond() {
        return completed == 0 ? Double.NaN : completed / wallSeconds;
    }

    /** The report as one JSON object (snake_case keys; null for figures there is nothing to compute from). */
    public ObjectNode toJson() {
        ObjectNode json = Json.object();
        json.put("url", url);
        json.put("model", model);
        json.put("concurrency", concurrency);
        json.put("requests", requests);
        json.put("prompt_tokens_asked", promptTokensAsked);
        json.put("max_tokens", maxTokens);
        json.put("completed", completed);
        json.put("errors", errors);
        json.put("first_error", firstError);
        json.put("wall_s", round(wallSeconds, 3));
        putCount(json, "prompt_tokens", promptTokens);
        json.put("output_tokens", outputTokens);
        json.put("usage_reported", usageReported);
        putFigure(json, "output_tok_s", outputTokensPerSecond(), 2);
        putFigure(json, "requests_s", requestsPerSecond(), 3);
        putLatency(json, "ttft_ms", timeToFirstToken);
        putLatency(json, "itl_ms", interTokenLatency);
        ObjectNode warm = json.putObject("warmup");
        putCount(warm, "prompt_tokens", warmupPromptTokens);
        putCount(warm, "output_tokens", warmupOutputTokens);
        return json;
    }

    /** The report as a short table for people. */
    public String toTable() {
        StringBuilder t = new StringBuilder();
        row(t, "server", url + ", model " + model);
        row(
                t,
                "requests",
                completed + " of " + requests + " completed, " + errors + " failed, " + concurrency + " at a time");
        if (firstError != null) {
            row(t, "first error", firstError);
        }
        if (completed > 0) {
            row(
                    t,
                    "prompt tokens",
                    (promptTokens >= 0 ? promptTokens + " (the server's count, " : "not reported (") + "~"
                            + promptTokensAsked + " asked per request)");
            row(
                    t,
                    "output tokens",
                    outputTokens + (usageReported ? "" : " (events with text: the server sent no usage)") + " ("
                            + maxTokens + " asked per request)");
            row(t, "wall time", format("%.2f s", wallSeconds));
            row(t, "output tok/s", format("%.1f", outputTokensPerSecond()));
            row(t, "requests/s", format("%.2f", requestsPerSecond()));
            row(t, "time to first token", latency(timeToFirstToken));
            row(t, "inter-token latency", latency(interTokenLatency));
        }
        return t.toString();
    }

    private static void row(StringBuilder t, String name, String value) {
        t.append(String.format(Locale.ROOT, "%-20s %s%n", name, value));
    }

    private static String latency(Latency l) {
        return Double.isNaN(l.p50()) ? "n/a" : format("p50 %.1f ms, p99 %.1f ms", l.p50(), l.p99());
    }

    private static String format(String pattern, Object... values) {
        return String.format(Locale.ROOT, pattern, values);
    }

    private static void putCount(ObjectNode json, String name, long count) {
        if (count >= 0) {
            json.put(name, count);
        } else {
            json.putNull(name);
        }
    }

    private static void putFigure(ObjectNode json, String name, double value, int decimals) {
        if (Double.isFinite(value)) {
            json.put(name, round(value, decimals));
        } else {
            json.putNull(name);
        }
    }

    private static void putLatency(ObjectNode json, String name, Latency l) {
        ObjectNode node = json.putObject(name);
        putFigure(node, "p50", l.p50(), 3);
        putFigure(node, "p99", l.p99(), 3);
    }

    private static double round(double value, int decimals) {
        double scale = Math.pow(10, decimals);
        return Math.round(value * scale) / scale;
    }
}
