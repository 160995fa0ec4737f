package dev.glimmer.server.api;

import com.fasterxml.jackson.databind.JsonNode;
import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.chat.ChatRequest;
import dev.glimmer.engine.chat.ToolCallGrammar;
import dev.glimmer.engine.chat.ToolSpec;
import dev.glimmer.engine.grammar.JsonSchemaGrammar;
import dev.glimmer.engine.grammar.OutputGrammar;
import dev.glimmer.server.http.ApiException;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * What a chat reply must look like, from the request: a forced tool call ({@code tool_choice}
 * {@code required} or a named function) or a JSON reply ({@code response_format} {@code json_object},
 * or {@code json_schema} with its schema). The grammar applies after the reasoning when thinking is on.
 * A schema outside the supported subset is a 400 that names the keyword.
 */
final class ReplyGrammars {
    private ReplyGrammars() {}

    /** @param chat the conversation after {@code tool_choice} "none" took its tools away */
    static Optional<OutputGrammar> of(Fields f, ChatRequest chat) {
        Optional<OutputGrammar> grammar = grammar(f, chat);
        if (grammar.isPresent() && chat.continuesFinalMessage()) {
            // The grammar describes a whole reply, and a continued message has begun already.
            throw ApiException.badRequest(
                    "a final assistant message is continued as written; it cannot be combined"
                            + " with a JSON response_format or a forced tool call",
                    "messages");
        }
        return grammar;
    }

    private static Optional<OutputGrammar> grammar(Fields f, ChatRequest chat) {
        Optional<List<ToolSpec>> forced = forcedTools(f, chat);
        if (forced.isPresent()) {
            try {
                return Optional.of(ToolCallGrammar.forced(forced.get(), chat.startsInReasoning()));
            } catch (InvalidInputException e) {
                throw ApiException.badRequest("tools: " + e.getMessage(), "tools");
            }
        }
        return responseFormat(f, chat.startsInReasoning());
    }

    /** The tools one of which must be called, when {@code tool_choice} forces a call. */
    private static Optional<List<ToolSpec>> forcedTools(Fields f, ChatRequest chat) {
        Optional<JsonNode> choice = f.node("tool_choice");
        if (choice.isEmpty()) {
            return Optional.empty();
        }
        JsonNode c = choice.get();
        if (c.isTextual() && c.textValue().equals("required")) {
            if (chat.tools().isEmpty()) {
                throw ApiException.badRequest(
                        "tool_choice \"required\" needs tools to call; the request has none", "tool_choice");
            }
            return Optional.of(chat.tools());
        }
        if (!c.isObject()) {
            return Optional.empty(); // "auto" and "none" (ChatCompletionRequest checks the rest)
        }
        JsonNode name = c.path("function").path("name");
        if (!c.path("type").asText("function").equals("function") || !name.isTextual()) {
            throw ApiException.badRequest(
                    "tool_choice as an object must be {\"type\":\"function\",\"function\":" + "{\"name\":…}}",
                    "tool_choice");
        }
        List<ToolSpec> named = chat.tools().stream()
                .filter(t -> t.name().equals(name.textValue()))
                .toList();
        if (named.isEmpty()) {
            throw ApiException.badRequest(
                    "tool_choice names the function '" + name.textValue() + "', which is not among the request's tools",
                    "tool_choice");
        }
        return Optional.of(List.of(named.getFirst()));
    }

    private static Optional<OutputGrammar> responseFormat(Fields f, boolean thinkingFirst) {
        Optional<JsonNode> format = f.object("response_format");
        if (format.isEmpty()) {
            return Optional.empty();
        }
        Fields ff = new Fields(format.get());
        String type = ff.string("type")
                .orElseThrow(() -> ApiException.badRequest(
                        "response_format.type is missing: use text, json_object or json_schema", "response_format"));
        return switch (type) {
            case "text" -> Optional.empty();
            case "json_object" ->
                Optional.of(new OutputGrammar(JsonSchemaGrammar.anyObject(), thinkingFirst, Set.of()));
            case "json_schema" -> {
                JsonNode spec = ff.object("json_schema")
                        .orElseThrow(() -> ApiException.badRequest(
                                "response_format.json_schema is missing: {\"name\":…,\"schema\":{…}}",
                                "response_format"));
                JsonNode schema = spec.path("schema");
                if (schema.isMissingNode() || schema.isNull()) {
                    schema =
                            com.fasterxml.jackson.databind.node.JsonNodeFactory.instance.objectNode(); // any JSON value
                }
                try {
                    yield Optional.of(new OutputGrammar(JsonSchemaGrammar.forSchema(schema), thinkingFirst, Set.of()));
                } catch (InvalidInputException e) {
                    throw ApiException.badRequest(
                            "response_format.json_schema.schema: " + e.getMessage(), "response_format");
                }
            }
            default ->
                throw ApiException.badRequest(
                        "response_format.type must be text, json_object or json_schema," + " got '" + type + "'",
                        "response_format");
        };
    }
}
