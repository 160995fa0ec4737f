package dev.glimmer.engine.chat;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * A tool the request offers the model.
 *
 * @param name       the function name
 * @param parameters the JSON schema of its arguments (an object schema), or a missing node
 * @param definition the tool exactly as the request gave it; the prompt shows it as JSON
 */
public record ToolSpec(String name, JsonNode parameters, JsonNode definition) {

    /**
     * Whether the model writes this argument as raw text: true when the schema declares the
     * parameter's type as {@code "string"} (alone or among several types). Other values are
     * written as JSON text.
     */
    public boolean isStringParameter(String argument) {
        JsonNode type = parameters.path("properties").path(argument).path("type");
        if (type.isTextual()) {
            return type.textValue().equals("string");
        }
        if (type.isArray()) {
            for (JsonNode t : type) {
                if (t.isTextual() && t.textValue().equals("string")) {
                    return true;
                }
            }
        }
        return false;
    }
}
