package dev.glimmer.server.api;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.http.ApiException;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The one way from another API's body to the chat completions request: the Responses and Anthropic
 * Messages requests are translated into a chat completions body and parsed by
 * {@link ChatCompletionRequest#parse}, so every chat feature (and every chat refusal) applies to
 * them unchanged. A 400 from that parse names the chat field; it is given the original API's name
 * for it (messages[2] stays messages[2], though: the index is that of the translated conversation).
 */
final class TranslatedChat {
    private TranslatedChat() {}

    /**
     * @param chatBody   a chat completions body
     * @param paramNames chat field → the original API's field, for the fields the translation renamed
     */
    static ChatCompletionRequest parse(
            ObjectNode chatBody,
            ServerConfig.SamplingDefaults defaults,
            boolean thinkingByDefault,
            Map<String, String> paramNames) {
        try {
            return ChatCompletionRequest.parse(chatBody, defaults, thinkingByDefault);
        } catch (ApiException e) {
            if (e.status() != 400 || e.param() == null) {
                throw e;
            }
            throw ApiException.badRequest(e.getMessage(), rename(e.param(), paramNames));
        }
    }

    /** {@code param} with its first name (before {@code .} or {@code [}) renamed when the translation renamed it. */
    private static String rename(String param, Map<String, String> paramNames) {
        int end = 0;
        while (end < param.length() && param.charAt(end) != '.' && param.charAt(end) != '[') {
            end++;
        }
        String renamed = paramNames.get(param.substring(0, end));
        return renamed == null ? param : renamed + param.substring(end);
    }

    /**
     * The sampling fields Glimmer's chat completions accept beyond OpenAI's (as llama-server's do),
     * accepted on the translated APIs too under the same names.
     */
    static final List<String> SAMPLING_EXTRAS =
            List.of("top_k", "min_p", "seed", "repeat_penalty", "presence_penalty", "frequency_penalty", "logit_bias");

    /** Copies the {@link #SAMPLING_EXTRAS} that {@code body} has into {@code chat}. */
    static void copySamplingExtras(JsonNode body, ObjectNode chat) {
        for (String field : SAMPLING_EXTRAS) {
            JsonNode value = body.get(field);
            if (value != null) {
                chat.set(field, value);
            }
        }
    }

    /** What an API adds to one of its declared tools once it is a chat function (its schema, an echo). */
    interface ToolFunction {
        /**
         * @param tool     the declared tool's fields
         * @param where    its place in the request, e.g. {@code tools[2]}
         * @param name     its name, checked to be given and not empty
         * @param function the chat function made of it, with {@code name} and {@code description} set
         */
        void complete(Fields tool, String where, String name, ObjectNode function);
    }

    /**
     * The request's {@code tools} array as chat function tools in {@code chat}: each must be an object
     * whose {@code type} is {@code type} (or left out) and which has a name; its description is kept.
     *
     * @param refusal what the 400 for another type says, before {@code , got 'TYPE'}
     * @param each    adds what the API declares beyond name and description, tool by tool
     */
    static void tools(Fields f, ObjectNode chat, String type, String refusal, ToolFunction each) {
        Optional<JsonNode> given = f.node("tools");
        if (given.isEmpty()) {
            return;
        }
        if (!given.get().isArray()) {
            throw Fields.wrongType("tools", "an array", given.get());
        }
        ArrayNode tools = chat.putArray("tools");
        for (int i = 0; i < given.get().size(); i++) {
            JsonNode tool = given.get().get(i);
            String where = "tools[" + i + "]";
            if (!tool.isObject()) {
                throw Fields.wrongType(where, "an object", tool);
            }
            Fields t = new Fields(tool);
            String declared = t.string("type").orElse(type);
            if (!declared.equals(type)) {
                throw ApiException.badRequest(
                        where + ".type: " + refusal + ", got '" + declared + "'", where + ".type");
            }
            String name = t.string("name")
                    .filter(n -> !n.isEmpty())
                    .orElseThrow(() -> ApiException.badRequest(where + ".name is missing", where + ".name"));
            ObjectNode function = tools.addObject().put("type", "function").putObject("function");
            function.put("name", name);
            t.string("description").ifPresent(d -> function.put("description", d));
            each.complete(t, where, name, function);
        }
    }

    /** The text of a string, or of an array of parts whose text is under one of {@code textFields} by part type. */
    static String text(JsonNode content, String where, Map<String, String> textFields) {
        if (content.isTextual()) {
            return content.textValue();
        }
        if (!content.isArray()) {
            throw Fields.wrongType(where, "a string or an array of content parts", content);
        }
        StringBuilder text = new StringBuilder();
        for (int i = 0; i < content.size(); i++) {
            var part = content.get(i);
            String partWhere = where + "[" + i + "]";
            if (!part.isObject()) {
                throw Fields.wrongType(partWhere, "an object", part);
            }
            String type = new Fields(part)
                    .string("type")
                    .orElseThrow(() -> ApiException.badRequest(partWhere + ".type is missing", partWhere + ".type"));
            String field = textFields.get(type);
            if (field == null) {
                throw ApiException.badRequest(
                        partWhere + ".type: unsupported content type '" + type + "'; this model reads text only ("
                                + String.join(", ", new java.util.TreeSet<>(textFields.keySet())) + ")",
                        partWhere + ".type");
            }
            text.append(new Fields(part).string(field).orElse(""));
        }
        return text.toString();
    }
}
