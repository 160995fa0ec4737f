package dev.glimmer.engine.chat;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.MissingNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.glimmer.engine.InvalidInputException;
import java.util.ArrayList;
import java.util.List;

/**
 * The one entry point from an OpenAI chat request body to a {@link ChatRequest}. It checks every
 * field the prompt depends on and says exactly which one is wrong, e.g.
 * {@code messages[2].role: unknown role 'bot' (system, user, assistant, tool)}.
 *
 * <p>It also settles what the template leaves to chance: a tool call's {@code arguments} given as a
 * JSON string becomes an object, {@code reasoning} is read as {@code reasoning_content}, null
 * content is the empty string (Jinja would print "None") and text parts are joined.
 * Fields that do not affect the prompt (model, sampling, ...) are left to the caller.
 */
public final class ChatRequestParser {

    private static final ObjectMapper JSON = new ObjectMapper().enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);

    /** Parses a request body given as JSON text. */
    public static ChatRequest parse(String body) {
        JsonNode root;
        try {
            root = JSON.readTree(body);
        } catch (JsonProcessingException e) {
            throw new InvalidInputException("the request is not valid JSON: " + e.getOriginalMessage());
        }
        if (root == null || root.isMissingNode()) {
            throw new InvalidInputException("the request is empty (expected a JSON object)");
        }
        return parse(root);
    }

    /** Parses a request body; thinking is on unless the request turns it off (the template's default). */
    public static ChatRequest parse(JsonNode body) {
        return parse(body, true);
    }

    /**
     * Parses a request body.
     *
     * @param thinkingByDefault whether the model thinks when the request does not say (the server's demo
     *                          model does not: its random weights never end a thought)
     */
    public static ChatRequest parse(JsonNode body, boolean thinkingByDefault) {
        if (!body.isObject()) {
            throw new InvalidInputException("the request must be a JSON object, got " + kind(body));
        }
        JsonNode messagesNode = body.path("messages");
        if (messagesNode.isMissingNode() || messagesNode.isNull()) {
            throw new InvalidInputException("messages: missing (the conversation, an array of messages)");
        }
        if (!messagesNode.isArray()) {
            throw new InvalidInputException("messages: must be an array, got " + kind(messagesNode));
        }
        if (messagesNode.isEmpty()) {
            throw new InvalidInputException("messages: must contain at least one message");
        }
        List<ChatMessage> messages = new ArrayList<>();
        for (int i = 0; i < messagesNode.size(); i++) {
            messages.add(message(messagesNode.get(i), "messages[" + i + "]"));
        }
        List<ToolSpec> tools = tools(body.path("tools"));

        // Thinking: reasoning_effort "none" turns it off and any other effort asks for it; an explicit
        // enable_thinking: false wins over an effort; neither given leaves the default.
        String effort = optionalString(body, "reasoning_effort", "reasoning_effort");
        boolean enableThinking = effort == null ? thinkingByDefault : !effort.equals("none");
        boolean clearThinking = true;
        JsonNode kwargs = body.path("chat_template_kwargs");
        if (!kwargs.isMissingNode() && !kwargs.isNull()) {
            if (!kwargs.isObject()) {
                throw new InvalidInputException("chat_template_kwargs: must be an object, got " + kind(kwargs));
            }
            enableThinking =
                    optionalBoolean(kwargs, "enable_thinking", "chat_template_kwargs.enable_thinking", enableThinking)
                            && (effort == null || !effort.equals("none"));
            clearThinking = optionalBoolean(kwargs, "clear_thinking", "chat_template_kwargs.clear_thinking", true);
        }
        return new ChatRequest(messages, tools, enableThinking, clearThinking);
    }

    private static ChatMessage message(JsonNode node, String where) {
        if (!node.isObject()) {
            throw new InvalidInputException(where + ": must be an object with a role, got " + kind(node));
        }
        JsonNode roleNode = node.path("role");
        if (!roleNode.isTextual()) {
            throw new InvalidInputException(where + ".role: "
                    + (roleNode.isMissingNode() ? "missing" : "must be a string") + " (" + Role.wireNames() + ")");
        }
        Role role = Role.fromWireName(roleNode.textValue())
                .orElseThrow(() -> new InvalidInputException(
                        where + ".role: unknown role '" + roleNode.textValue() + "' (" + Role.wireNames() + ")"));
        String content = content(node.path("content"), where + ".content");
        String reasoning = optionalString(node, "reasoning_content", where + ".reasoning_content");
        if (reasoning == null) {
            reasoning = optionalString(node, "reasoning", where + ".reasoning");
        }
        List<AssistantToolCall> toolCalls = toolCalls(node.path("tool_calls"), role, where + ".tool_calls");
        String toolCallId = optionalString(node, "tool_call_id", where + ".tool_call_id");
        String name = optionalString(node, "name", where + ".name");
        return new ChatMessage(role, content, role == Role.ASSISTANT ? reasoning : null, toolCalls, toolCallId, name);
    }

    /** A string, or an array of {@code {"type":"text","text":…}} parts (joined); null or absent is "". */
    private static String content(JsonNode node, String where) {
        if (node.isMissingNode() || node.isNull()) {
            return "";
        }
        if (node.isTextual()) {
            return node.textValue();
        }
        if (!node.isArray()) {
            throw new InvalidInputException(where + ": must be a string or an array of text parts, got " + kind(node));
        }
        StringBuilder text = new StringBuilder();
        for (int i = 0; i < node.size(); i++) {
            JsonNode part = node.get(i);
            String partWhere = where + "[" + i + "]";
            if (!part.isObject()) {
                throw new InvalidInputException(
                        partWhere + ": must be an object {\"type\":\"text\",\"text\":…}, got " + kind(part));
            }
            JsonNode type = part.path("type");
            if (!type.isTextual() || !type.textValue().equals("text")) {
                throw new InvalidInputException(partWhere + ".type: "
                        + (type.isTextual()
                                ? "unsupported content part type '" + type.textValue() + "'"
                                : "missing or not a string")
                        + " (this model reads only \"text\" parts)");
            }
            JsonNode partText = part.path("text");
            if (!partText.isTextual()) {
                throw new InvalidInputException(partWhere + ".text: must be a string, got " + kind(partText));
            }
            text.append(partText.textValue());
        }
        return text.toString();
    }

    private static List<AssistantToolCall> toolCalls(JsonNode node, Role role, String where) {
        if (node.isMissingNode() || node.isNull()) {
            return List.of();
        }
        if (!node.isArray()) {
            throw new InvalidInputException(where + ": must be an array, got " + kind(node));
        }
        if (role != Role.ASSISTANT && !node.isEmpty()) {
            throw new InvalidInputException(
                    where + ": only assistant messages carry tool calls, this one is " + role.wireName());
        }
        List<AssistantToolCall> calls = new ArrayList<>();
        for (int i = 0; i < node.size(); i++) {
            JsonNode call = node.get(i);
            String callWhere = where + "[" + i + "]";
            if (!call.isObject()) {
                throw new InvalidInputException(callWhere + ": must be an object, got " + kind(call));
            }
            String type = optionalString(call, "type", callWhere + ".type");
            if (type != null && !type.equals("function")) {
                throw new InvalidInputException(callWhere + ".type: unknown tool call type '" + type + "' (function)");
            }
            JsonNode function = call.path("function");
            if (!function.isObject()) {
                throw new InvalidInputException(callWhere + ".function: "
                        + (function.isMissingNode() ? "missing" : "must be an object, got " + kind(function))
                        + " (with name and arguments)");
            }
            String name = optionalString(function, "name", callWhere + ".function.name");
            if (name == null || name.isEmpty()) {
                throw new InvalidInputException(callWhere + ".function.name: missing or empty");
            }
            ObjectNode arguments = arguments(function.path("arguments"), callWhere + ".function.arguments");
            calls.add(new AssistantToolCall(optionalString(call, "id", callWhere + ".id"), name, arguments));
        }
        return calls;
    }

    /** A JSON object, or a string holding one (as OpenAI sends it); absent, null or blank is {}. */
    private static ObjectNode arguments(JsonNode node, String where) {
        if (node.isMissingNode() || node.isNull()) {
            return JsonNodeFactory.instance.objectNode();
        }
        if (node.isObject()) {
            return (ObjectNode) node;
        }
        if (!node.isTextual()) {
            throw new InvalidInputException(
                    where + ": must be a JSON object or a string holding one, got " + kind(node));
        }
        if (node.textValue().isBlank()) {
            return JsonNodeFactory.instance.objectNode();
        }
        JsonNode parsed;
        try {
            parsed = JSON.readTree(node.textValue());
        } catch (JsonProcessingException e) {
            throw new InvalidInputException(where + ": not valid JSON: " + e.getOriginalMessage());
        }
        if (!parsed.isObject()) {
            throw new InvalidInputException(where + ": must hold a JSON object, got " + kind(parsed));
        }
        return (ObjectNode) parsed;
    }

    private static List<ToolSpec> tools(JsonNode node) {
        if (node.isMissingNode() || node.isNull()) {
            return List.of();
        }
        if (!node.isArray()) {
            throw new InvalidInputException("tools: must be an array, got " + kind(node));
        }
        List<ToolSpec> tools = new ArrayList<>();
        for (int i = 0; i < node.size(); i++) {
            JsonNode tool = node.get(i);
            String where = "tools[" + i + "]";
            if (!tool.isObject()) {
                throw new InvalidInputException(where + ": must be an object, got " + kind(tool));
            }
            String type = optionalString(tool, "type", where + ".type");
            if (type != null && !type.equals("function")) {
                throw new InvalidInputException(where + ".type: unknown tool type '" + type + "' (function)");
            }
            JsonNode function = tool.path("function");
            if (!function.isObject()) {
                throw new InvalidInputException(where + ".function: "
                        + (function.isMissingNode() ? "missing" : "must be an object, got " + kind(function))
                        + " (with name and parameters)");
            }
            String name = optionalString(function, "name", where + ".function.name");
            if (name == null || name.isEmpty()) {
                throw new InvalidInputException(where + ".function.name: missing or empty");
            }
            JsonNode parameters = function.path("parameters");
            if (parameters.isNull()) {
                parameters = MissingNode.getInstance();
            }
            if (!parameters.isMissingNode() && !parameters.isObject()) {
                throw new InvalidInputException(
                        where + ".function.parameters: must be a JSON schema object, got " + kind(parameters));
            }
            tools.add(new ToolSpec(name, parameters, tool));
        }
        return tools;
    }

    private static String optionalString(JsonNode parent, String field, String where) {
        JsonNode node = parent.path(field);
        if (node.isMissingNode() || node.isNull()) {
            return null;
        }
        if (!node.isTextual()) {
            throw new InvalidInputException(where + ": must be a string, got " + kind(node));
        }
        return node.textValue();
    }

    private static boolean optionalBoolean(JsonNode parent, String field, String where, boolean absent) {
        JsonNode node = parent.path(field);
        if (node.isMissingNode() || node.isNull()) {
            return absent;
        }
        if (!node.isBoolean()) {
            throw new InvalidInputException(where + ": must be true or false, got " + kind(node));
        }
        return node.booleanValue();
    }

    /** How a JSON value is described in messages: "a number", "an array", ... */
    private static String kind(JsonNode node) {
        return switch (node.getNodeType()) {
            case OBJECT -> "an object";
            case ARRAY -> "an array";
            case STRING -> "a string";
            case NUMBER -> "a number";
            case BOOLEAN -> "a boolean";
            case NULL -> "null";
            default -> "nothing";
        };
    }

    private ChatRequestParser() {}
}
