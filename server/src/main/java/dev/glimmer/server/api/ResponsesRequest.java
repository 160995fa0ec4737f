package dev.glimmer.server.api;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.glimmer.server.config.ServerConfig;
import dev.glimmer.server.http.ApiException;
import dev.glimmer.server.http.Json;
import java.util.Map;
import java.util.Optional;
import java.util.function.Function;

/**
 * A {@code POST /v1/responses} body (OpenAI's Responses API), translated into the chat completions
 * request it means: {@code instructions} become the first system message, the input items become
 * messages (consecutive {@code reasoning}, assistant {@code message} and {@code function_call} items
 * make one assistant turn; {@code function_call_output} items are tool messages), {@code tools} and
 * {@code tool_choice} take the chat form, {@code text.format} becomes {@code response_format},
 * {@code max_output_tokens} {@code max_tokens} and {@code reasoning.effort: "none"} turns GLM's
 * thinking off. The thinking of earlier turns stays in the prompt (the template's
 * {@code clear_thinking: false}).
 *
 * @param chat          the request as the chat completions route would have it
 * @param conversation  the items this response continues: the previous response's conversation, then
 *                      this request's input (a text input as a user message item)
 * @param settings      the request's settings as a Response object repeats them ({@code instructions},
 *                      {@code tools}, {@code text}, ...)
 * @param store         whether the response is kept for {@code GET} and {@code previous_response_id}
 */
public record ResponsesRequest(ChatCompletionRequest chat, ArrayNode conversation, ObjectNode settings, boolean store) {

    /** Chat field → Responses field, for the errors of the chat parse. */
    private static final Map<String, String> PARAM_NAMES = Map.of(
            "messages",
            "input",
            "max_tokens",
            "max_output_tokens",
            "response_format",
            "text.format",
            "chat_template_kwargs",
            "reasoning");
    /** Content part type → its text field, for the parts a text model reads. */
    private static final Map<String, String> TEXT_PARTS =
            Map.of("input_text", "text", "output_text", "text", "text", "text", "refusal", "refusal");

    private static final Map<String, String> REASONING_PARTS = Map.of("reasoning_text", "text", "summary_text", "text");

    /**
     * @param previous the conversation of a stored response by id (empty when there is none)
     */
    public static ResponsesRequest parse(
            JsonNode body,
            ServerConfig.SamplingDefaults defaults,
            boolean thinkingByDefault,
            Function<String, Optional<ArrayNode>> previous) {
        Fields f = new Fields(body);
        for (String unsupported : new String[] {"conversation", "prompt"}) {
            if (f.node(unsupported).isPresent()) {
                throw ApiException.badRequest(
                        unsupported + " is not supported by this server; send the conversation"
                                + " as input (and previous_response_id)",
                        unsupported);
            }
        }
        if (f.bool("background").orElse(false)) {
            throw ApiException.badRequest(
                    "background responses are not supported by this server; leave background"
                            + " out (stream for long answers)",
                    "background");
        }
        if (f.integer("top_logprobs", 0, 20).orElse(0) > 0) {
            throw ApiException.badRequest(
                    "top_logprobs is not supported on /v1/responses; use /v1/chat/completions" + " with logprobs",
                    "top_logprobs");
        }
        ObjectNode chat = Json.object();
        f.string("model").ifPresent(m -> chat.put("model", m));
        ArrayNode messages = chat.putArray("messages");
        Optional<String> instructions = f.string("instructions");
        instructions.ifPresent(
                text -> messages.addObject().put("role", "system").put("content", text));

        ArrayNode conversation = Json.MAPPER.createArrayNode();
        Optional<String> previousId = f.string("previous_response_id");
        previousId.ifPresent(id -> conversation.addAll(previous.apply(id)
                .orElseThrow(() -> ApiException.badRequest(
                        "previous response with id '" + id
                                + "' not found (it was not stored, was deleted or has expired)",
                        "previous_response_id"))));
        int inputStart = conversation.size();
        conversation.addAll(input(f));
        // Reasoning items in the input are there for the model to read (OpenAI passes them back for that),
        // so the template keeps every turn's thinking. A follow-up's prompt then repeats the earlier
        // prompt and output token for token, and the KV cache holds all of it.
        chat.putObject("chat_template_kwargs").put("clear_thinking", false);
        Messages turns = new Messages(messages);
        for (int i = 0; i < conversation.size(); i++) {
            turns.add(conversation.get(i), i < inputStart ? "previous_response_id" : "input[" + (i - inputStart) + "]");
        }
        if (messages.isEmpty()) {
            throw ApiException.badRequest("input is missing: give the text or items to respond to", "input");
        }

        ObjectNode settings = Json.object();
        settings.put("instructions", instructions.orElse(null));
        settings.put("previous_response_id", previousId.orElse(null));
        settings.set("tools", tools(f, chat));
        settings.set("tool_choice", toolChoice(f, chat));
        settings.putObject("text").set("format", textFormat(f, chat));
        settings.set("reasoning", reasoning(f, chat));
        f.node("max_output_tokens").ifPresent(n -> chat.set("max_tokens", n));
        f.node("temperature").ifPresent(n -> chat.set("temperature", n));
        f.node("top_p").ifPresent(n -> chat.set("top_p", n));
        f.node("stream").ifPresent(n -> chat.set("stream", n));
        TranslatedChat.copySamplingExtras(body, chat);
        ChatCompletionRequest request = TranslatedChat.parse(chat, defaults, thinkingByDefault, PARAM_NAMES);

        boolean store = f.bool("store").orElse(true);
        settings.put("store", store);
        if (f.node("max_output_tokens").isPresent()) {
            settings.put("max_output_tokens", request.options().maxTokens());
        } else {
            settings.putNull("max_output_tokens");
        }
        settings.put("temperature", request.options().sampling().temperature());
        settings.put("top_p", request.options().sampling().topP());
        settings.put("parallel_tool_calls", f.bool("parallel_tool_calls").orElse(true));
        settings.put("truncation", f.string("truncation").orElse("disabled"));
        settings.put("user", f.string("user").orElse(null));
        settings.set("metadata", f.object("metadata").orElse(Json.object()));
        return new ResponsesRequest(request, conversation, settings, store);
    }

    /** The input as items: a text is one user message. */
    private static ArrayNode input(Fields f) {
        ArrayNode items = Json.MAPPER.createArrayNode();
        Optional<JsonNode> input = f.node("input");
        if (input.isEmpty()) {
            return items;
        }
        JsonNode in = input.get();
        if (in.isTextual()) {
            ObjectNode message = items.addObject();
            message.put("type", "message");
            message.put("role", "user");
            message.putArray("content").addObject().put("type", "input_text").put("text", in.textValue());
        } else if (in.isArray()) {
            in.forEach(item -> items.add(item.deepCopy()));
        } else {
            throw Fields.wrongType("input", "a string or an array of items", in);
        }
        return items;
    }

    /** Builds chat messages from items, merging the items of one assistant turn. */
    private static final class Messages {
        private final ArrayNode messages;
        /** The assistant turn that the next assistant-side item joins, or null. */
        private ObjectNode assistant;

        Messages(ArrayNode messages) {
            this.messages = messages;
        }

        void add(JsonNode item, String where) {
            if (!item.isObject()) {
                throw Fields.wrongType(where, "an object (an input item)", item);
            }
            Fields f = new Fields(item);
            String type = f.string("type").orElse(f.node("role").isPresent() ? "message" : "");
            switch (type) {
                case "message" -> message(f, where);
                case "reasoning" -> reasoning(item, where);
                case "function_call" -> {
                    ObjectNode call = turn(false).withArray("tool_calls").addObject();
                    call.put("id", required(f, "call_id", where));
                    call.put("type", "function");
                    call.putObject("function")
                            .put("name", required(f, "name", where))
                            .put("arguments", required(f, "arguments", where));
                }
                case "function_call_output" -> {
                    assistant = null;
                    ObjectNode tool = messages.addObject();
                    tool.put("role", "tool");
                    tool.put("tool_call_id", required(f, "call_id", where));
                    JsonNode output = f.node("output")
                            .orElseThrow(
                                    () -> ApiException.badRequest(where + ".output is missing", where + ".output"));
                    tool.put("content", TranslatedChat.text(output, where + ".output", TEXT_PARTS));
                }
                case "" ->
                    throw ApiException.badRequest(
                            where + ".type is missing (message, reasoning, function_call," + " function_call_output)",
                            where + ".type");
                default ->
                    throw ApiException.badRequest(
                            where + ".type: unsupported item type '" + type
                                    + "' (message, reasoning, function_call, function_call_output)",
                            where + ".type");
            }
        }

        private void message(Fields f, String where) {
            String role = required(f, "role", where);
            String text = TranslatedChat.text(
                    f.node("content")
                            .orElseThrow(
                                    () -> ApiException.badRequest(where + ".content is missing", where + ".content")),
                    where + ".content",
                    TEXT_PARTS);
            switch (role) {
                case "assistant" -> {
                    ObjectNode turn = turn(false);
                    turn.put("content", turn.path("content").asText("") + text);
                }
                case "user", "system", "developer" -> {
                    assistant = null;
                    // The developer role is OpenAI's newer name for system.
                    messages.addObject()
                            .put("role", role.equals("developer") ? "system" : role)
                            .put("content", text);
                }
                default ->
                    throw ApiException.badRequest(
                            where + ".role: unknown role '" + role + "' (user, assistant, system, developer)",
                            where + ".role");
            }
        }

        private void reasoning(JsonNode item, String where) {
            JsonNode parts = item.path("content");
            if (parts.isMissingNode() || parts.isNull() || parts.isEmpty()) {
                parts = item.path("summary");
            }
            String text = parts.isMissingNode() || parts.isNull()
                    ? ""
                    : TranslatedChat.text(parts, where + ".content", REASONING_PARTS);
            ObjectNode turn = turn(true);
            turn.put("reasoning_content", turn.path("reasoning_content").asText("") + text);
        }

        /** The assistant turn to add to; reasoning after an answer or a call starts the next turn. */
        private ObjectNode turn(boolean forReasoning) {
            boolean answered = assistant != null
                    && (!assistant.path("content").asText("").isEmpty() || assistant.has("tool_calls"));
            if (assistant == null || forReasoning && answered) {
                assistant = messages.addObject();
                assistant.put("role", "assistant");
                assistant.put("content", "");
            }
            return assistant;
        }

        private static String required(Fields f, String field, String where) {
            return f.string(field)
                    .orElseThrow(
                            () -> ApiException.badRequest(where + "." + field + " is missing", where + "." + field));
        }
    }

    /** Responses function tools → chat tools; returns the tools as the Response object lists them. */
    private static ArrayNode tools(Fields f, ObjectNode chat) {
        ArrayNode echo = Json.MAPPER.createArrayNode();
        TranslatedChat.tools(
                f,
                chat,
                "function",
                "only function tools are supported by this server",
                (tool, where, name, function) -> {
                    tool.object("parameters").ifPresent(p -> function.set("parameters", p));
                    ObjectNode e = echo.addObject();
                    e.put("type", "function");
                    e.put("name", name);
                    e.put("description", tool.string("description").orElse(null));
                    e.set("parameters", tool.object("parameters").orElse(null));
                    e.put("strict", tool.bool("strict").orElse(false));
                });
        return echo;
    }

    /** {@code auto}, {@code none}, {@code required} or {@code {"type":"function","name":…}} → chat's tool_choice. */
    private static JsonNode toolChoice(Fields f, ObjectNode chat) {
        Optional<JsonNode> given = f.node("tool_choice");
        if (given.isEmpty()) {
            return Json.MAPPER.getNodeFactory().textNode("auto");
        }
        JsonNode c = given.get();
        if (c.isTextual()) {
            chat.set("tool_choice", c);
        } else if (c.isObject() && "function".equals(c.path("type").asText())) {
            String name = new Fields(c)
                    .string("name")
                    .orElseThrow(() -> ApiException.badRequest("tool_choice.name is missing", "tool_choice.name"));
            chat.putObject("tool_choice")
                    .put("type", "function")
                    .putObject("function")
                    .put("name", name);
        } else {
            throw ApiException.badRequest(
                    "tool_choice must be \"auto\", \"none\", \"required\" or" + " {\"type\":\"function\",\"name\":…}",
                    "tool_choice");
        }
        return c;
    }

    /** {@code text.format} → chat's {@code response_format}; returns the format as the Response object repeats it. */
    private static JsonNode textFormat(Fields f, ObjectNode chat) {
        ObjectNode text = Json.object().put("type", "text");
        Optional<JsonNode> textField = f.object("text");
        if (textField.isEmpty()) {
            return text;
        }
        Optional<JsonNode> format = new Fields(textField.get()).object("format");
        if (format.isEmpty()) {
            return text;
        }
        Fields ff = new Fields(format.get());
        String type = ff.string("type").orElse("text");
        switch (type) {
            case "text" -> {}
            case "json_object" -> chat.putObject("response_format").put("type", "json_object");
            case "json_schema" -> {
                ObjectNode schema = chat.putObject("response_format")
                        .put("type", "json_schema")
                        .putObject("json_schema");
                for (String field : new String[] {"name", "description", "schema", "strict"}) {
                    ff.node(field).ifPresent(v -> schema.set(field, v));
                }
            }
            default ->
                throw ApiException.badRequest(
                        "text.format.type must be text, json_object or json_schema, got '" + type + "'",
                        "text.format.type");
        }
        return format.get();
    }

    /** {@code reasoning.effort}: "none" turns GLM's thinking off; GLM has one depth, so the others mean on. */
    private static JsonNode reasoning(Fields f, ObjectNode chat) {
        ObjectNode echo = Json.object();
        echo.putNull("effort");
        echo.putNull("summary");
        Optional<JsonNode> given = f.object("reasoning");
        if (given.isEmpty()) {
            return echo;
        }
        Optional<String> effort = new Fields(given.get()).string("effort");
        effort.ifPresent(e -> {
            echo.put("effort", e);
            ((ObjectNode) chat.get("chat_template_kwargs")).put("enable_thinking", !e.equals("none"));
        });
        return echo;
    }
}
