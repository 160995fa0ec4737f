package dev.glimmer.server.api;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.http.ApiException;
import dev.glimmer.server.http.Json;
import java.util.Map;
import java.util.Optional;

/**
 * A {@code POST /v1/messages} body (Anthropic's Messages API), translated into the chat completions
 * request it means: {@code system} becomes the first system message; a user message's
 * {@code tool_result} blocks become tool messages (before its text); an assistant message's
 * {@code thinking}, {@code text} and {@code tool_use} blocks become its reasoning, content and tool
 * calls; {@code tools} with {@code input_schema} become function tools; {@code tool_choice}
 * {@code any} is chat's {@code required} and {@code tool} a named function; {@code stop_sequences}
 * is {@code stop}. GLM's thinking is on only with {@code thinking: {"type": "enabled"}} (or
 * {@code adaptive}), as Claude's is.
 */
public final class MessagesRequest {

    /** Chat field → Messages field, for the errors of the chat parse. */
    private static final Map<String, String> PARAM_NAMES =
            Map.of("stop", "stop_sequences", "chat_template_kwargs", "thinking");

    private static final Map<String, String> TEXT_BLOCKS = Map.of("text", "text");

    /**
     * @param counting true for {@code /v1/messages/count_tokens}, whose body has no {@code max_tokens}
     * @return the request as the chat completions route would have it
     */
    public static ChatCompletionRequest parse(JsonNode body, ServerConfig.SamplingDefaults defaults, boolean counting) {
        Fields f = new Fields(body);
        ObjectNode chat = Json.object();
        f.string("model").ifPresent(m -> chat.put("model", m));
        ArrayNode messages = chat.putArray("messages");
        f.node("system")
                .ifPresent(system -> messages.addObject()
                        .put("role", "system")
                        .put("content", TranslatedChat.text(system, "system", TEXT_BLOCKS)));
        JsonNode given = f.node("messages")
                .orElseThrow(() -> ApiException.badRequest(
                        "messages is missing (the conversation, an array of messages)", "messages"));
        if (!given.isArray() || given.isEmpty()) {
            throw ApiException.badRequest("messages must be a non-empty array of messages", "messages");
        }
        for (int i = 0; i < given.size(); i++) {
            message(given.get(i), "messages[" + i + "]", messages);
        }
        if (!counting) {
            if (f.node("max_tokens").isEmpty()) {
                throw ApiException.badRequest("max_tokens is missing: the most tokens to generate", "max_tokens");
            }
            chat.set("max_tokens", f.node("max_tokens").get());
        }
        TranslatedChat.tools(
                f,
                chat,
                "custom",
                "only client tools (with input_schema) are supported by this server",
                (tool, where, name, function) -> function.set(
                        "parameters",
                        tool.object("input_schema")
                                .orElseThrow(() -> ApiException.badRequest(
                                        where + ".input_schema is missing (the JSON schema of the tool's" + " input)",
                                        where + ".input_schema"))));
        toolChoice(f, chat);
        thinking(f, chat);
        f.node("stop_sequences").ifPresent(n -> chat.set("stop", n));
        for (String field : new String[] {"temperature", "top_p", "top_k", "stream"}) {
            f.node(field).ifPresent(n -> chat.set(field, n));
        }
        TranslatedChat.copySamplingExtras(body, chat);
        // thinking() always says whether to think, so the model's default does not matter here.
        return TranslatedChat.parse(chat, defaults, false, PARAM_NAMES);
    }

    /** One Anthropic message → chat messages: tool results first (each its own tool message), then the text. */
    private static void message(JsonNode message, String where, ArrayNode messages) {
        if (!message.isObject()) {
            throw Fields.wrongType(where, "an object with a role and content", message);
        }
        Fields f = new Fields(message);
        String role = f.string("role")
                .orElseThrow(() ->
                        ApiException.badRequest(where + ".role is missing (user," + " assistant)", where + ".role"));
        if (!role.equals("user") && !role.equals("assistant")) {
            throw ApiException.badRequest(
                    where + ".role: unknown role '" + role + "' (user, assistant; the system"
                            + " prompt goes in system)",
                    where + ".role");
        }
        JsonNode content = f.node("content")
                .orElseThrow(() -> ApiException.badRequest(where + ".content is missing", where + ".content"));
        if (content.isTextual()) {
            messages.addObject().put("role", role).put("content", content.textValue());
            return;
        }
        if (!content.isArray()) {
            throw Fields.wrongType(where + ".content", "a string or an array of content blocks", content);
        }
        StringBuilder text = new StringBuilder();
        StringBuilder thinking = new StringBuilder();
        boolean toolResults = false;
        ArrayNode calls = Json.MAPPER.createArrayNode();
        for (int i = 0; i < content.size(); i++) {
            JsonNode block = content.get(i);
            String blockWhere = where + ".content[" + i + "]";
            if (!block.isObject()) {
                throw Fields.wrongType(blockWhere, "a content block object", block);
            }
            Fields b = new Fields(block);
            String type = b.string("type").orElse("");
            switch (role + ":" + type) {
                case "user:text", "assistant:text" ->
                    text.append(b.string("text").orElse(""));
                case "assistant:thinking" ->
                    thinking.append(b.string("thinking").orElse(""));
                case "assistant:redacted_thinking" -> {
                    // Another model's encrypted reasoning: nothing this one can read.
                }
                case "assistant:tool_use" -> {
                    ObjectNode call = calls.addObject();
                    call.put("id", required(b, "id", blockWhere));
                    call.put("type", "function");
                    ObjectNode function = call.putObject("function");
                    function.put("name", required(b, "name", blockWhere));
                    function.set("arguments", b.object("input").orElse(Json.object()));
                }
                case "user:tool_result" -> {
                    toolResults = true;
                    ObjectNode tool = messages.addObject();
                    tool.put("role", "tool");
                    tool.put("tool_call_id", required(b, "tool_use_id", blockWhere));
                    JsonNode result = b.node("content")
                            .orElse(Json.MAPPER.getNodeFactory().textNode(""));
                    tool.put("content", TranslatedChat.text(result, blockWhere + ".content", TEXT_BLOCKS));
                }
                default ->
                    throw ApiException.badRequest(
                            blockWhere + ".type: unsupported content block '" + type
                                    + "' in a"
                                    + (role.equals("user")
                                            ? " user message (text, tool_result)"
                                            : "n assistant message (text, thinking, redacted_thinking, tool_use)")
                                    + "; this model reads text only",
                            blockWhere + ".type");
            }
        }
        if (role.equals("assistant")) {
            ObjectNode m = messages.addObject().put("role", "assistant").put("content", text.toString());
            if (!thinking.isEmpty()) {
                m.put("reasoning_content", thinking.toString());
            }
            if (!calls.isEmpty()) {
                m.set("tool_calls", calls);
            }
        } else if (!text.isEmpty() || !toolResults) {
            messages.addObject().put("role", "user").put("content", text.toString());
        }
    }

    /** {@code auto}, {@code any} (chat's {@code required}), {@code tool} (a named function), {@code none}. */
    private static void toolChoice(Fields f, ObjectNode chat) {
        Optional<JsonNode> given = f.object("tool_choice");
        if (given.isEmpty()) {
            return;
        }
        Fields c = new Fields(given.get());
        String type = c.string("type").orElse("");
        switch (type) {
            case "auto", "none" -> chat.put("tool_choice", type);
            case "any" -> chat.put("tool_choice", "required");
            case "tool" ->
                chat.putObject("tool_choice")
                        .put("type", "function")
                        .putObject("function")
                        .put(
                                "name",
                                c.string("name")
                                        .orElseThrow(() -> ApiException.badRequest(
                                                "tool_choice.name is missing", "tool_choice.name")));
            default ->
                throw ApiException.badRequest(
                        "tool_choice.type must be auto, any, tool or none, got '" + type + "'", "tool_choice.type");
        }
    }

    /** {@code thinking.type}: enabled (or adaptive) turns GLM's thinking on; disabled or absent leaves it off. */
    private static void thinking(Fields f, ObjectNode chat) {
        boolean on = false;
        Optional<JsonNode> given = f.object("thinking");
        if (given.isPresent()) {
            String type = new Fields(given.get()).string("type").orElse("");
            on = switch (type) {
                case "enabled", "adaptive" -> true;
                case "disabled" -> false;
                default ->
                    throw ApiException.badRequest(
                            "thinking.type must be enabled, adaptive or disabled, got '" + type + "'", "thinking.type");
            };
        }
        chat.putObject("chat_template_kwargs").put("enable_thinking", on);
    }

    private static String required(Fields f, String field, String where) {
        return f.string(field)
                .orElseThrow(() -> ApiException.badRequest(where + "." + field + " is missing", where + "." + field));
    }

    private MessagesRequest() {}
}
