package dev.glimmer.engine.chat;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.io.JsonStringEncoder;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * Turns the text the model wrote between {@code <arg_value>} and {@code </arg_value>} into JSON for
 * a tool call's {@code arguments}. The template writes string arguments raw and all others as JSON
 * text, so the parameter's schema type says how to read a value back.
 */
final class ArgumentJson {

    private static final ObjectMapper JSON = new ObjectMapper()
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
            .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS); // keep 1e400 or 0.1000 exactly

    /** The characters of {@code text} escaped for the inside of a JSON string (no quotes added). */
    static String escape(String text) {
        return new String(JsonStringEncoder.getInstance().quoteAsString(text));
    }

    /** A JSON string literal. */
    static String quote(String text) {
        return '"' + escape(text) + '"';
    }

    /**
     * A non-string value: the JSON it holds (compact), or the text as a JSON string when it is not
     * valid JSON.
     */
    static String typed(String raw) {
        String text = PythonText.strip(raw);
        try {
            JsonNode value = JSON.readTree(text);
            if (value != null && !value.isMissingNode()) {
                return JSON.writeValueAsString(value);
            }
        } catch (JsonProcessingException e) {
            // Not JSON: the model wrote text where the schema asked for something else; keep it.
        }
        return quote(raw);
    }

    private ArgumentJson() {}
}
