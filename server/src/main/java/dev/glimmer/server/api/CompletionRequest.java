package dev.glimmer.server.api;

import com.fasterxml.jackson.databind.JsonNode;
import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.http.ApiException;

import java.util.ArrayList;
import java.util.List;

/**
 * A {@code POST /v1/completions} body: one raw prompt or a list of them (as OpenAI and llama-server
 * accept: {@code "text"}, {@code [1, 2, 3]}, {@code ["a", "b"]} or {@code [[1, 2], [3]]}), each
 * continued as its own choice.
 *
 * @param prompts the prompts, in order (choice {@code i} continues prompt {@code i})
 * @param options sampling, limits and streaming, shared by every prompt
 */
public record CompletionRequest(List<Prompt> prompts, GenerationOptions options) {

    /** The most prompts one request may hold. */
    public static final int MAX_PROMPTS = 16;

    /** One prompt: text (tokenized with special tokens parsed) or token ids. */
    public sealed interface Prompt {
        record Text(String text) implements Prompt {
        }

        record Tokens(int[] ids) implements Prompt {
        }
    }

    public CompletionRequest {
        prompts = List.copyOf(prompts);
    }

    public static CompletionRequest parse(JsonNode body, ServerConfig.SamplingDefaults defaults) {
        Fields f = new Fields(body);
        // Any model name is this server's one model (clients must send one and rarely know its id).
        f.string("model");
        JsonNode prompt = f.node("prompt").orElseThrow(
                () -> ApiException.badRequest("prompt is required: a string or an array of token ids", "prompt"));
        GenerationOptions options = GenerationOptionsParser.parse(f, defaults, false);
        if (!prompt.isTextual() && !prompt.isArray()) {
            throw Fields.wrongType("prompt", "a string or an array of token ids", prompt);
        }
        boolean batch = prompt.isArray() && !prompt.isEmpty() && (prompt.get(0).isTextual() || prompt.get(0).isArray());
        if (!batch) {
            return new CompletionRequest(List.of(one(prompt, "prompt")), options);
        }
        if (prompt.size() > MAX_PROMPTS) {
            throw ApiException.badRequest("prompt holds " + prompt.size() + " prompts; at most " + MAX_PROMPTS
                    + " per request", "prompt");
        }
        List<Prompt> prompts = new ArrayList<>();
        for (int i = 0; i < prompt.size(); i++) {
            JsonNode p = prompt.get(i);
            if (!p.isTextual() && !p.isArray()) {
                throw ApiException.badRequest("prompt[" + i + "] must be a string or an array of token ids, got "
                        + Fields.typeName(p), "prompt");
            }
            prompts.add(one(p, "prompt[" + i + "]"));
        }
        return new CompletionRequest(prompts, options);
    }

    /** A prompt given as text or as an array of token ids; {@code where} names it in error messages. */
    private static Prompt one(JsonNode prompt, String where) {
        if (prompt.isTextual()) {
            if (prompt.textValue().isEmpty()) {
                throw ApiException.badRequest(where + " must not be empty", "prompt");
            }
            return new Prompt.Text(prompt.textValue());
        }
        if (prompt.isEmpty()) {
            throw ApiException.badRequest(where + " must not be empty", "prompt");
        }
        int[] ids = new int[prompt.size()];
        for (int i = 0; i < ids.length; i++) {
            JsonNode id = prompt.get(i);
            if (!id.isIntegralNumber() || !id.canConvertToInt() || id.intValue() < 0) {
                throw ApiException.badRequest(where + "[" + i + "] must be a token id (an integer >= 0), got "
                        + Fields.describe(id), "prompt");
            }
            ids[i] = id.intValue();
        }
        return new Prompt.Tokens(ids);
    }
}
