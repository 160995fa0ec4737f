package dev.glimmer.engine.chat;

import com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * A tool call made by an earlier assistant turn, as the request carries it in history.
 *
 * @param id        the call's id; may be null
 * @param name      the function name
 * @param arguments the arguments as a JSON object, keys in the order the client gave them
 */
public record AssistantToolCall(String id, String name, ObjectNode arguments) {}
