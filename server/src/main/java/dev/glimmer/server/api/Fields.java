package dev.glimmer.server.api;

import com.fasterxml.jackson.databind.JsonNode;
import dev.glimmer.server.http.ApiException;
import java.util.Locale;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalInt;
import java.util.OptionalLong;

/**
 * Typed, checked access to the fields of a JSON request body. A field that is absent or JSON
 * {@code null} counts as not given (OpenAI clients send explicit nulls); a field of the wrong type is
 * a 400 naming the field and the type it has.
 */
final class Fields {
    private final JsonNode body;

    Fields(JsonNode body) {
        this.body = body;
    }

    Optional<JsonNode> node(String name) {
        JsonNode n = body.get(name);
        return n == null || n.isNull() ? Optional.empty() : Optional.of(n);
    }

    OptionalDouble number(String name) {
        Optional<JsonNode> n = node(name);
        if (n.isEmpty()) {
            return OptionalDouble.empty();
        }
        if (!n.get().isNumber()) {
            throw wrongType(name, "a number", n.get());
        }
        return OptionalDouble.of(n.get().doubleValue());
    }

    OptionalLong integer(String name) {
        Optional<JsonNode> n = node(name);
        if (n.isEmpty()) {
            return OptionalLong.empty();
        }
        JsonNode v = n.get();
        // 5.0 is accepted as 5 (some clients serialise every number as a double); 5.5 is not.
        if (!v.isIntegralNumber() && !(v.isNumber() && v.doubleValue() == Math.rint(v.doubleValue()))) {
            throw wrongType(name, "an integer", v);
        }
        if (!v.canConvertToLong() && v.isIntegralNumber()) {
            throw ApiException.badRequest(name + " is out of range: " + describe(v), name);
        }
        return OptionalLong.of(v.isIntegralNumber() ? v.longValue() : (long) v.doubleValue());
    }

    OptionalInt integer(String name, long min, long max) {
        OptionalLong v = integer(name);
        if (v.isEmpty()) {
            return OptionalInt.empty();
        }
        if (v.getAsLong() < min || v.getAsLong() > max) {
            throw ApiException.badRequest(
                    name + " must be between " + min + " and " + max + ", got " + v.getAsLong(), name);
        }
        return OptionalInt.of((int) v.getAsLong());
    }

    Optional<Boolean> bool(String name) {
        Optional<JsonNode> n = node(name);
        if (n.isEmpty()) {
            return Optional.empty();
        }
        if (!n.get().isBoolean()) {
            throw wrongType(name, "a boolean", n.get());
        }
        return Optional.of(n.get().booleanValue());
    }

    Optional<String> string(String name) {
        Optional<JsonNode> n = node(name);
        if (n.isEmpty()) {
            return Optional.empty();
        }
        if (!n.get().isTextual()) {
            throw wrongType(name, "a string", n.get());
        }
        return Optional.of(n.get().textValue());
    }

    Optional<JsonNode> object(String name) {
        Optional<JsonNode> n = node(name);
        if (n.isPresent() && !n.get().isObject()) {
            throw wrongType(name, "an object", n.get());
        }
        return n;
    }

    static ApiException wrongType(String name, String expected, JsonNode got) {
        return ApiException.badRequest(name + " must be " + expected + ", got " + typeName(got), name);
    }

    /** A number's text (cut to 40 characters: a client may send thousands of digits), else its type name. */
    static String describe(JsonNode node) {
        if (!node.isNumber()) {
            return typeName(node);
        }
        String text = node.asText();
        return text.length() <= 40 ? text : text.substring(0, 40) + "...";
    }

    static String typeName(JsonNode node) {
        return switch (node.getNodeType()) {
            case ARRAY -> "an array";
            case OBJECT, POJO -> "an object";
            case STRING -> "a string";
            case NUMBER -> "a number";
            case BOOLEAN -> "a boolean";
            default -> node.getNodeType().name().toLowerCase(Locale.ROOT);
        };
    }
}
