package dev.glimmer.server.api;

import com.fasterxml.jackson.databind.JsonNode;
import dev.glimmer.engine.tokenizer.SpecialTokens;
import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.http.ApiException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A {@code POST /v1/completions} body: one raw prompt or a list of them (as OpenAI and llama-server
 * accept: {@code "text"}, {@code [1, 2, 3]}, {@code ["a", "b"]} or {@code [[1, 2], [3]]}), each
 * continued as its own choice.
 *
 * @param prompts   the prompts, in order (choice {@code i} continues prompt {@code i})
 * @param options   sampling, limits and streaming, shared by every prompt
 * @param ignoreEos llama-server's {@code ignore_eos}: the model's end-of-generation tokens are never picked,
 *                  so only max_tokens, the context or a stop string end a choice (load generators rely on it
 *                  to make every request generate the same number of tokens)
 */
public record CompletionRequest(List<Prompt> prompts, GenerationOptions options, boolean ignoreEos) {

    /** The most prompts one request may hold, and the most choices (prompts times n). */
    public static final int MAX_PROMPTS = 16;

    /** One prompt: text (tokenized with special tokens parsed) or token ids. */
    public sealed interface Prompt {
        record Text(String text) implements Prompt {}

        record Tokens(int[] ids) implements Prompt {}
    }

    public CompletionRequest {
        prompts = List.copyOf(prompts);
    }

    public static CompletionRequest parse(JsonNode body, ServerConfig.SamplingDefaults defaults) {
        Fields f = new Fields(body);
        // Any model name is this server's one model (clients must send one and rarely know its id).
        f.string("model");
        JsonNode prompt = f.node("prompt")
                .orElseThrow(() ->
                        ApiException.badRequest("prompt is required: a string or an array of token ids", "prompt"));
        GenerationOptions options = GenerationOptionsParser.parse(f, defaults, false);
        boolean ignoreEos = f.bool("ignore_eos").orElse(false);
        if (!prompt.isTextual() && !prompt.isArray()) {
            throw Fields.wrongType("prompt", "a string or an array of token ids", prompt);
        }
        boolean batch = prompt.isArray()
                && !prompt.isEmpty()
                && (prompt.get(0).isTextual() || prompt.get(0).isArray());
        if (!batch) {
            return new CompletionRequest(List.of(one(prompt, "prompt")), options, ignoreEos);
        }
        if (prompt.size() > MAX_PROMPTS) {
            throw ApiException.badRequest(
                    "prompt holds " + prompt.size() + " prompts; at most " + MAX_PROMPTS + " per request", "prompt");
        }
        if (prompt.size() * options.choices() > MAX_PROMPTS) {
            throw ApiException.badRequest(
                    "n (" + options.choices() + ") times the " + prompt.size() + " prompts is "
                            + prompt.size() * options.choices() + " choices; at most " + MAX_PROMPTS + " per request",
                    "n");
        }
        List<Prompt> prompts = new ArrayList<>();
        for (int i = 0; i < prompt.size(); i++) {
            JsonNode p = prompt.get(i);
            if (!p.isTextual() && !p.isArray()) {
                throw ApiException.badRequest(
                        "prompt[" + i + "] must be a string or an array of token ids, got " + Fields.typeName(p),
                        "prompt");
            }
            prompts.add(one(p, "prompt[" + i + "]"));
        }
        return new CompletionRequest(prompts, options, ignoreEos);
    }

    /**
     * The options the prompts run with on a model whose special tokens are {@code special}: with
     * {@code ignore_eos}, each end-of-generation token gets a logit bias of minus infinity (as llama-server
     * does), whatever bias the request gave it.
     */
    public GenerationOptions optionsFor(SpecialTokens special) {
        if (!ignoreEos) {
            return options;
        }
        Map<Integer, Float> bias = new HashMap<>(options.sampling().logitBias());
        for (int token : special.endOfGeneration()) {
            bias.put(token, Float.NEGATIVE_INFINITY);
        }
        return options.withSampling(options.sampling().withLogitBias(bias));
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
                throw ApiException.badRequest(
                        where + "[" + i + "] must be a token id (an integer >= 0), got " + Fields.describe(id),
                        "prompt");
            }
            ids[i] = id.intValue();
        }
        return new Prompt.Tokens(ids);
    }
}
