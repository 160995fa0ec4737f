package dev.glimmer.server.api;

import com.fasterxml.jackson.databind.JsonNode;
import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.http.ApiException;

import java.util.Optional;

/**
 * A {@code POST /v1/completions} body: a raw prompt, given as text or as token ids.
 *
 * @param model   the model id the client named, if any
 * @param text    the prompt text (tokenized with special tokens parsed), when given as text
 * @param tokens  the prompt token ids, when given as ids
 * @param options sampling, limits and streaming
 */
public record CompletionRequest(Optional<String> model, Optional<String> text, Optional<int[]> tokens,
                                GenerationOptions options) {

    public static CompletionRequest parse(JsonNode body, ServerConfig.SamplingDefaults defaults) {
        Fields f = new Fields(body);
        Optional<String> model = f.string("model");
        JsonNode prompt = f.node("prompt").orElseThrow(
                () -> ApiException.badRequest("prompt is required: a string or an array of token ids", "prompt"));
        // OpenAI also accepts a one-element batch: ["text"] or [[1, 2, 3]].
        if (prompt.isArray() && prompt.size() == 1 && (prompt.get(0).isTextual() || prompt.get(0).isArray())) {
            prompt = prompt.get(0);
        }
        GenerationOptions options = GenerationOptionsParser.parse(f, defaults, false);
        if (prompt.isTextual()) {
            if (prompt.textValue().isEmpty()) {
                throw ApiException.badRequest("prompt must not be empty", "prompt");
            }
            return new CompletionRequest(model, Optional.of(prompt.textValue()), Optional.empty(), options);
        }
        if (prompt.isArray()) {
            if (prompt.isEmpty()) {
                throw ApiException.badRequest("prompt must not be empty", "prompt");
            }
            int[] ids = new int[prompt.size()];
            for (int i = 0; i < ids.length; i++) {
                JsonNode id = prompt.get(i);
                if (id.isArray() || id.isTextual()) {
                    throw ApiException.badRequest("prompt holds several prompts; send one per request", "prompt");
                }
                if (!id.isIntegralNumber() || !id.canConvertToInt() || id.intValue() < 0) {
                    throw ApiException.badRequest("prompt[" + i + "] must be a token id (an integer >= 0), got " + id,
                            "prompt");
                }
                ids[i] = id.intValue();
            }
            return new CompletionRequest(model, Optional.empty(), Optional.of(ids), options);
        }
        throw Fields.wrongType("prompt", "a string or an array of token ids", prompt);
    }
}
