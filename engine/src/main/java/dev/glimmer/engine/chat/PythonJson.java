package dev.glimmer.engine.chat;

import com.fasterxml.jackson.databind.JsonNode;
import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;
import java.util.Iterator;
import java.util.Map;

/**
 * JSON text exactly as Python's {@code json.dumps(value, ensure_ascii=False)} writes it, which is
 * what the chat template's {@code tojson} filter produces under Hugging Face's renderer: separators
 * {@code ", "} and {@code ": "}, keys in their given order, non-ASCII characters kept, control
 * characters escaped, floats printed like Python's {@code repr} ({@code 1.0}, {@code 1e-05},
 * {@code 1e+20}) and integers as integers. The prompt the model sees must match the one it was
 * trained with byte for byte, so none of this may drift.
 */
public final class PythonJson {

    public static String dumps(JsonNode value) {
        StringBuilder out = new StringBuilder();
        write(value, out);
        return out.toString();
    }

    private static void write(JsonNode value, StringBuilder out) {
        switch (value.getNodeType()) {
            case OBJECT -> {
                out.append('{');
                Iterator<Map.Entry<String, JsonNode>> fields =
                        value.properties().iterator();
                while (fields.hasNext()) {
                    Map.Entry<String, JsonNode> field = fields.next();
                    writeString(field.getKey(), out);
                    out.append(": ");
                    write(field.getValue(), out);
                    if (fields.hasNext()) {
                        out.append(", ");
                    }
                }
                out.append('}');
            }
            case ARRAY -> {
                out.append('[');
                for (int i = 0; i < value.size(); i++) {
                    if (i > 0) {
                        out.append(", ");
                    }
                    write(value.get(i), out);
                }
                out.append(']');
            }
            case STRING -> writeString(value.textValue(), out);
            case NUMBER ->
                out.append(
                        value.isIntegralNumber() ? value.bigIntegerValue().toString() : floatRepr(value.doubleValue()));
            case BOOLEAN -> out.append(value.booleanValue() ? "true" : "false");
            case NULL, MISSING -> out.append("null");
            default -> throw new IllegalArgumentException("not a JSON value: " + value.getNodeType());
        }
    }

    /** A JSON string literal: only {@code "}, {@code \} and characters below U+0020 are escaped. */
    static void writeString(String text, StringBuilder out) {
        out.append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                case '\b' -> out.append("\\b");
                case '\f' -> out.append("\\f");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        out.append('"');
    }

    /**
     * Python's {@code repr(float)}: the shortest digits that read back as the same double (the
     * closest such when several have that length), in positional notation when the decimal exponent
     * is in [-4, 16), else as {@code d.ddde±XX}. {@link Double#toString} is not used because it
     * never prints fewer than two digits ({@code 4.9E-324} where Python prints {@code 5e-324}).
     */
    static String floatRepr(double value) {
        if (Double.isNaN(value)) {
            return "NaN";
        }
        if (Double.isInfinite(value)) {
            return value > 0 ? "Infinity" : "-Infinity";
        }
        if (value == 0) {
            return Double.doubleToRawLongBits(value) < 0 ? "-0.0" : "0.0";
        }
        BigDecimal shortest = shortestDigits(Math.abs(value)).stripTrailingZeros();
        String digits = shortest.unscaledValue().toString();
        int pointPosition = digits.length() - shortest.scale(); // value = 0.digits × 10^pointPosition
        StringBuilder out = new StringBuilder(value < 0 ? "-" : "");
        if (pointPosition > 16 || pointPosition <= -4) {
            int exponent = pointPosition - 1;
            out.append(digits.charAt(0));
            if (digits.length() > 1) {
                out.append('.').append(digits, 1, digits.length());
            }
            out.append('e').append(exponent < 0 ? '-' : '+');
            int magnitude = Math.abs(exponent);
            out.append(magnitude < 10 ? "0" : "").append(magnitude);
        } else if (pointPosition <= 0) {
            out.append("0.").append("0".repeat(-pointPosition)).append(digits);
        } else if (pointPosition < digits.length()) {
            out.append(digits, 0, pointPosition).append('.').append(digits, pointPosition, digits.length());
        } else {
            out.append(digits)
                    .append("0".repeat(pointPosition - digits.length()))
                    .append(".0");
        }
        return out.toString();
    }

    /** The value rounded to the fewest significant digits that still read back as {@code value}. */
    private static BigDecimal shortestDigits(double value) {
        BigDecimal exact = new BigDecimal(value);
        for (int digits = 1; digits < 17; digits++) {
            BigDecimal rounded = exact.round(new MathContext(digits, RoundingMode.HALF_EVEN));
            if (rounded.doubleValue() == value) {
                return rounded;
            }
        }
        return exact.round(new MathContext(17, RoundingMode.HALF_EVEN));
    }

    private PythonJson() {}
}
