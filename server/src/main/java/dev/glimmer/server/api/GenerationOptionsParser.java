package dev.glimmer.server.api;

import com.fasterxml.jackson.databind.JsonNode;
import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.sampling.SamplingParams;
import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.http.ApiException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Reads the fields shared by {@code /v1/chat/completions} and {@code /v1/completions}: sampling,
 * limits, stop strings, log-probabilities, streaming and the features not supported yet (answered
 * with a clear 400 instead of being ignored).
 */
final class GenerationOptionsParser {
    /** The largest max_tokens accepted; anything above is a client mistake, not a wish. */
    static final int MAX_TOKENS_LIMIT = 1 << 24;

    static final int MAX_STOP_STRINGS = 16;
    /** The most choices ({@code n}) of one request: each is a generation of its own, queued like a request. */
    static final int MAX_CHOICES = 8;

    private GenerationOptionsParser() {}

    static GenerationOptions parse(Fields f, ServerConfig.SamplingDefaults defaults, boolean chat) {
        rejectUnsupported(f, chat);
        SamplingParams sampling = sampling(f, defaults);

        int maxTokens = defaults.maxTokens();
        String maxName = f.node("max_completion_tokens").isPresent() ? "max_completion_tokens" : "max_tokens";
        var given = f.integer(maxName);
        if (given.isPresent()) {
            long n = given.getAsLong();
            if (n < 1 || n > MAX_TOKENS_LIMIT) {
                throw ApiException.badRequest(
                        maxName + " must be between 1 and " + MAX_TOKENS_LIMIT + ", got " + n, maxName);
            }
            maxTokens = (int) n;
        }

        boolean logprobs;
        int topLogprobs;
        if (chat) {
            logprobs = f.bool("logprobs").orElse(false);
            topLogprobs = f.integer("top_logprobs", 0, 20).orElse(0);
            if (topLogprobs > 0 && !logprobs) {
                throw ApiException.badRequest("top_logprobs needs logprobs: true", "top_logprobs");
            }
        } else {
            // The completions API's logprobs is the number of alternatives (0-5), not a flag.
            var n = f.integer("logprobs", 0, 5);
            logprobs = n.isPresent();
            topLogprobs = n.orElse(0);
        }

        boolean stream = f.bool("stream").orElse(false);
        boolean includeUsage = false;
        var streamOptions = f.object("stream_options");
        if (streamOptions.isPresent()) {
            includeUsage = new Fields(streamOptions.get()).bool("include_usage").orElse(false);
        }
        String user = f.string("user").orElse("");
        int choices = f.integer("n", 1, MAX_CHOICES).orElse(1);
        return new GenerationOptions(
                sampling,
                maxTokens,
                stop(f),
                logprobs,
                topLogprobs,
                stream,
                includeUsage,
                user,
                Optional.empty(),
                choices);
    }

    private static void rejectUnsupported(Fields f, boolean chat) {
        // Chat reads response_format itself (ResponseFormats); a raw completion has no reply to constrain.
        var format = f.object("response_format");
        if (!chat && format.isPresent()) {
            String type = new Fields(format.get()).string("type").orElse("text");
            if (!type.equals("text")) {
                throw ApiException.badRequest(
                        "response_format " + type + " is supported on /v1/chat/completions only;"
                                + " leave response_format out or use {\"type\":\"text\"}",
                        "response_format");
            }
        }
    }

    private static SamplingParams sampling(Fields f, ServerConfig.SamplingDefaults d) {
        float temperature = (float) f.number("temperature").orElse(d.temperature());
        int topK = f.integer("top_k", 0, Integer.MAX_VALUE).orElse(d.topK());
        float topP = (float) f.number("top_p").orElse(d.topP());
        float minP = (float) f.number("min_p").orElse(d.minP());
        float repeat = (float) f.number("repeat_penalty").orElse(1);
        float presence = (float) f.number("presence_penalty").orElse(0);
        float frequency = (float) f.number("frequency_penalty").orElse(0);
        try {
            SamplingParams p = new SamplingParams(
                    temperature,
                    topK,
                    topP,
                    minP,
                    java.util.OptionalLong.empty(),
                    repeat,
                    presence,
                    frequency,
                    SamplingParams.DEFAULT_PENALTY_WINDOW,
                    logitBias(f));
            var seed = f.integer("seed");
            return seed.isPresent() ? p.withSeed(seed.getAsLong()) : p;
        } catch (InvalidInputException e) {
            throw ApiException.badRequest(e.getMessage(), paramOf(e.getMessage()));
        }
    }

    /** The field a SamplingParams message starts with ("top_p must be ..."). */
    private static String paramOf(String message) {
        int space = message.indexOf(' ');
        return space > 0 ? message.substring(0, space) : null;
    }

    private static Map<Integer, Float> logitBias(Fields f) {
        var bias = f.object("logit_bias");
        if (bias.isEmpty()) {
            return Map.of();
        }
        Map<Integer, Float> result = new HashMap<>();
        Iterator<Map.Entry<String, JsonNode>> it = bias.get().fields();
        while (it.hasNext()) {
            Map.Entry<String, JsonNode> e = it.next();
            int token;
            try {
                token = Integer.parseInt(e.getKey().strip());
            } catch (NumberFormatException ex) {
                throw ApiException.badRequest(
                        "logit_bias keys must be token ids, got '" + e.getKey() + "'", "logit_bias");
            }
            if (!e.getValue().isNumber()) {
                throw ApiException.badRequest(
                        "logit_bias values must be numbers, got " + Fields.typeName(e.getValue()) + " for token "
                                + token,
                        "logit_bias");
            }
            double v = e.getValue().doubleValue();
            if (v < -100 || v > 100) {
                throw ApiException.badRequest(
                        "logit_bias values must be between -100 and 100, got " + v + " for token " + token,
                        "logit_bias");
            }
            result.put(token, (float) v);
        }
        return result;
    }

    private static List<String> stop(Fields f) {
        var stop = f.node("stop");
        if (stop.isEmpty()) {
            return List.of();
        }
        JsonNode node = stop.get();
        if (node.isTextual()) {
            return node.textValue().isEmpty() ? List.of() : List.of(node.textValue());
        }
        if (!node.isArray()) {
            throw Fields.wrongType("stop", "a string or an array of strings", node);
        }
        if (node.size() > MAX_STOP_STRINGS) {
            throw ApiException.badRequest(
                    "stop may hold at most " + MAX_STOP_STRINGS + " strings, got " + node.size(), "stop");
        }
        List<String> result = new ArrayList<>();
        for (JsonNode s : node) {
            if (!s.isTextual()) {
                throw Fields.wrongType("stop", "a string or an array of strings", s);
            }
            if (!s.textValue().isEmpty()) {
                result.add(s.textValue());
            }
        }
        return result;
    }
}
