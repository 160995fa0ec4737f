package dev.glimmer.server.routes;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.chat.ChatRequestParser;
import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.http.ApiException;
import dev.glimmer.server.http.Json;
import dev.glimmer.server.http.RequestBodies;
import dev.glimmer.server.inference.ModelHost;
import dev.glimmer.server.inference.ServedModel;
import io.helidon.webserver.http.HttpRules;
import io.helidon.webserver.http.HttpService;
import io.helidon.webserver.http.ServerRequest;
import io.helidon.webserver.http.ServerResponse;
import java.nio.charset.StandardCharsets;
import java.util.Locale;

/**
 * llama-server's helpers: {@code POST /tokenize} ({@code {"content", "parse_special", "with_pieces"}}
 * → {@code {"tokens"}}), {@code POST /detokenize} ({@code {"tokens"}} → {@code {"content"}}) and
 * {@code POST /apply-template} (a chat request → {@code {"prompt"}}, the text the model would see; without
 * the closing {@code <|assistant|>} turn when {@code add_generation_prompt} is false).
 */
public record TokenizerRoutes(ModelHost host, ServerConfig config) implements HttpService {

    @Override
    public void routing(HttpRules rules) {
        rules.post("/tokenize", this::tokenize)
                .post("/detokenize", this::detokenize)
                .post("/apply-template", this::applyTemplate);
    }

    private void tokenize(ServerRequest req, ServerResponse res) {
        ServedModel model = host.require();
        JsonNode body = RequestBodies.jsonObject(req, config.maxBodyBytes());
        JsonNode content = body.get("content");
        if (content == null || !content.isTextual()) {
            throw ApiException.badRequest("content must be a string (the text to tokenize)", "content");
        }
        boolean parseSpecial = flag(body, "parse_special", true);
        boolean withPieces = flag(body, "with_pieces", false);
        int[] ids = model.tokenizer().encode(content.textValue(), parseSpecial);
        ObjectNode out = Json.object();
        ArrayNode tokens = out.putArray("tokens");
        for (int id : ids) {
            if (withPieces) {
                tokens.addObject()
                        .put("id", id)
                        .put("piece", new String(model.tokenizer().piece(id, true), StandardCharsets.UTF_8));
            } else {
                tokens.add(id);
            }
        }
        ModelRoutes.send(res, out);
    }

    private void detokenize(ServerRequest req, ServerResponse res) {
        ServedModel model = host.require();
        JsonNode body = RequestBodies.jsonObject(req, config.maxBodyBytes());
        JsonNode tokens = body.get("tokens");
        if (tokens == null || !tokens.isArray()) {
            throw ApiException.badRequest("tokens must be an array of token ids", "tokens");
        }
        int[] ids = new int[tokens.size()];
        for (int i = 0; i < ids.length; i++) {
            JsonNode t = tokens.get(i);
            if (!t.isIntegralNumber()
                    || !t.canConvertToInt()
                    || t.intValue() < 0
                    || t.intValue() >= model.vocabSize()) {
                // The value is quoted only when short: a client may send anything there.
                String got = t.isValueNode() && t.asText().length() <= 40
                        ? t.asText()
                        : t.getNodeType().name().toLowerCase(Locale.ROOT);
                throw ApiException.badRequest(
                        "tokens[" + i + "] must be a token id in 0.." + (model.vocabSize() - 1) + ", got " + got,
                        "tokens");
            }
            ids[i] = t.intValue();
        }
        ObjectNode out = Json.object();
        out.put("content", model.tokenizer().decode(ids, true));
        ModelRoutes.send(res, out);
    }

    private void applyTemplate(ServerRequest req, ServerResponse res) {
        ServedModel model = host.require();
        JsonNode body = RequestBodies.jsonObject(req, config.maxBodyBytes());
        boolean addGenerationPrompt = flag(body, "add_generation_prompt", true);
        String prompt;
        try {
            prompt = model.chatFormat()
                    .template()
                    .render(ChatRequestParser.parse(body, model.thinksByDefault()), addGenerationPrompt);
        } catch (InvalidInputException e) {
            throw ApiException.badRequest(e.getMessage(), "messages");
        }
        ObjectNode out = Json.object();
        out.put("prompt", prompt);
        ModelRoutes.send(res, out);
    }

    private static boolean flag(JsonNode body, String name, boolean fallback) {
        JsonNode v = body.get(name);
        if (v == null || v.isNull()) {
            return fallback;
        }
        if (!v.isBoolean()) {
            throw ApiException.badRequest(name + " must be a boolean", name);
        }
        return v.booleanValue();
    }
}
