package dev.glimmer.server.http;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

/** The one Jackson mapper of the server (thread-safe once configured). */
public final class Json {
    public static final ObjectMapper MAPPER = new ObjectMapper();

    public static ObjectNode object() {
        return MAPPER.createObjectNode();
    }

    /** Compact JSON text of a tree or record. */
    public static String write(Object value) {
        try {
            return MAPPER.writeValueAsString(value);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException(
                    "cannot serialise " + value.getClass().getSimpleName(), e);
        }
    }

    private Json() {}
}
