package dev.glimmer.server.loadgen;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.glimmer.server.http.Json;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.channels.UnresolvedAddressException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;

/**
 * One streaming {@code POST /v1/completions}, timed line by line as the server-sent events arrive. Greedy,
 * {@code ignore_eos} (so every server generates {@code max_tokens}), and {@code stream_options.include_usage}
 * (so the server says how many tokens the prompt and the answer had). Whatever goes wrong becomes the
 * result's one-line error: nothing is thrown.
 */
final class StreamedCompletion {
    /** The most bytes of an error answer read for its message. */
    private static final int ERROR_BODY_LIMIT = 64 * 1024;
    /** The longest error reason reported. */
    private static final int REASON_LIMIT = 300;

    private final HttpClient client;
    private final LoadSettings settings;
    private final Watchdog watchdog;
    private final URI url;

    StreamedCompletion(HttpClient client, LoadSettings settings, Watchdog watchdog) {
        this.client = client;
        this.settings = settings;
        this.watchdog = watchdog;
        this.url = settings.resolve("/v1/completions");
    }

    /** Sends {@code prompt} for {@code maxTokens} tokens to {@code model} and reads the whole stream. */
    RequestResult run(String model, String prompt, int maxTokens) {
        ObjectNode body = Json.object();
        body.put("model", model);
        body.put("prompt", prompt);
        body.put("max_tokens", maxTokens);
        body.put("temperature", 0);
        body.put("stream", true);
        body.putObject("stream_options").put("include_usage", true);
        body.put("ignore_eos", true);
        HttpRequest.Builder request = HttpRequest.newBuilder(url)
                .header("Content-Type", "application/json")
                .header("Accept", "text/event-stream")
                .POST(HttpRequest.BodyPublishers.ofString(Json.write(body)));
        settings.apiKey().ifPresent(key -> request.header("Authorization", "Bearer " + key));

        long sent = System.nanoTime();
        try (Watchdog.Watch watch = watchdog.watch()) {
            try {
                HttpResponse<InputStream> response =
                        client.send(request.build(), HttpResponse.BodyHandlers.ofInputStream());
                watch.heard();
                try (InputStream in = response.body()) {
                    return read(response, in, watch, sent);
                }
            } catch (InterruptedException | IOException e) {
                if (watch.fired()) {
                    return RequestResult.failed(
                            sent,
                            "the server sent nothing for " + settings.timeout().toSeconds() + " s (--timeout)");
                }
                if (e instanceof InterruptedException) {
                    Thread.currentThread().interrupt();
                    return RequestResult.failed(sent, "interrupted");
                }
                return RequestResult.failed(sent, describe((IOException) e, url, settings.timeout()));
            }
        }
    }

    private RequestResult read(HttpResponse<InputStream> response, InputStream in, Watchdog.Watch watch, long sent)
            throws IOException {
        if (response.statusCode() != 200) {
            String answer = new String(in.readNBytes(ERROR_BODY_LIMIT), StandardCharsets.UTF_8);
            return RequestResult.failed(
                    sent, oneLine("HTTP " + response.statusCode() + " from " + url + ": " + errorMessage(answer)));
        }
        String type = response.headers().firstValue("Content-Type").orElse("no content type");
        if (!type.startsWith("text/event-stream")) {
            return RequestResult.failed(
                    sent,
                    oneLine("the answer is " + type + ", not an event stream: the server"
                            + " does not stream /v1/completions"));
        }
        BufferedReader lines = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
        Stream stream = new Stream();
        long last = sent;
        String line;
        while ((line = lines.readLine()) != null) {
            last = System.nanoTime();
            watch.heard();
            String failure = stream.line(line, last);
            if (failure != null) {
                return RequestResult.failed(sent, oneLine(failure));
            }
            if (stream.done) {
                break;
            }
        }
        // Some servers (llama.cpp forks) send no [DONE]: their body ends after the choices' finish_reason.
        String failure = stream.done ? null : stream.line("", last);
        if (failure != null) {
            return RequestResult.failed(sent, oneLine(failure));
        }
        if (!stream.done && !stream.finished) {
            return RequestResult.failed(
                    sent, "the stream ended before data: [DONE] after " + stream.contentCount + " events with text");
        }
        return new RequestResult(
                sent,
                last,
                Arrays.copyOf(stream.contentNanos, stream.contentCount),
                stream.promptTokens,
                stream.outputTokens,
                null);
    }

    /** The server-sent events of one answer, fed line by line. */
    private static final class Stream {
        private final StringBuilder data = new StringBuilder();
        private long dataNanos;
        long[] contentNanos = new long[64];
        int contentCount;
        int promptTokens = -1;
        int outputTokens = -1;
        /** A choice has said its finish_reason. */
        boolean finished;
        /** data: [DONE] has come. */
        boolean done;

        /** Takes one line that arrived at {@code nanos}; returns why the stream is wrong, or null. */
        String line(String line, long nanos) {
            if (line.isEmpty()) {
                return dispatch();
            }
            if (line.startsWith("data:")) {
                // An event's time is that of its first data line.
                if (data.isEmpty()) {
                    dataNanos = nanos;
                } else {
                    data.append('\n');
                }
                data.append(line, line.startsWith("data: ") ? 6 : 5, line.length());
            }
            // Comments (": ping") and the other fields (event:, id:, retry:) carry nothing to measure.
            return null;
        }

        private String dispatch() {
            if (data.isEmpty()) {
                return null;
            }
            String text = data.toString();
            data.setLength(0);
            if (text.equals("[DONE]")) {
                done = true;
                return null;
            }
            JsonNode event;
            try {
                event = Json.MAPPER.readTree(text);
            } catch (JsonProcessingException e) {
                return "the server sent an event that is not JSON: " + text;
            }
            if (event.hasNonNull("error")) {
                return "the server ended the stream with an error: " + errorMessage(text);
            }
            boolean hasText = false;
            for (JsonNode choice : event.path("choices")) {
                hasText |= !choice.path("text").asText("").isEmpty();
                finished |= choice.path("finish_reason").isTextual();
            }
            if (hasText) {
                if (contentCount == contentNanos.length) {
                    contentNanos = Arrays.copyOf(contentNanos, contentCount * 2);
                }
                contentNanos[contentCount++] = dataNanos;
            }
            JsonNode usage = event.path("usage");
            if (usage.isObject()) {
                promptTokens = usage.path("prompt_tokens").asInt(-1);
                outputTokens = usage.path("completion_tokens").asInt(-1);
            }
            return null;
        }
    }

    /**
     * The message of an error answer: OpenAI's and llama-server's {@code {"error": {"message": …}}}, an
     * {@code {"error": "…"}} or {@code {"message": …}} as other servers send, else the text itself.
     */
    static String errorMessage(String answer) {
        try {
            JsonNode json = Json.MAPPER.readTree(answer);
            JsonNode error = json.path("error");
            if (error.path("message").isTextual()) {
                return error.path("message").textValue();
            }
            if (error.isTextual()) {
                return error.textValue();
            }
            if (json.path("message").isTextual()) {
                return json.path("message").textValue();
            }
        } catch (JsonProcessingException notJson) {
            // Reported as it came.
        }
        return answer.isBlank() ? "(no message)" : answer;
    }

    /**
     * A connection failure in words: the JDK's exceptions for a refused connection or an unknown host carry
     * no message, only their types.
     */
    static String describe(IOException e, URI url, Duration timeout) {
        String server = url.getHost() + ":"
                + (url.getPort() >= 0 ? url.getPort() : url.getScheme().equals("https") ? 443 : 80);
        if (e instanceof HttpConnectTimeoutException) {
            return "cannot connect to " + server + " within " + timeout.toSeconds() + " s (--timeout)";
        }
        if (e instanceof ConnectException) {
            for (Throwable t = e; t != null; t = t.getCause()) {
                if (t instanceof UnresolvedAddressException) {
                    return "cannot connect to " + server + ": unknown host";
                }
            }
            return oneLine("cannot connect to " + server + ": " + rootMessage(e, "connection refused"));
        }
        return oneLine("the connection to " + server + " failed: "
                + rootMessage(e, e.getClass().getSimpleName()));
    }

    /** The innermost message of {@code e}'s causes, or {@code fallback} when none has one. */
    private static String rootMessage(Throwable e, String fallback) {
        String message = null;
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t.getMessage() != null && !t.getMessage().isBlank()) {
                message = t.getMessage();
            }
        }
        return message == null ? fallback : message;
    }

    static String oneLine(String text) {
        String line = text.strip().replaceAll("\\s+", " ");
        return line.length() <= REASON_LIMIT ? line : line.substring(0, REASON_LIMIT - 1) + "…";
    }
}
