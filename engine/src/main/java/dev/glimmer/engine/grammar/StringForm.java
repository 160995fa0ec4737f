package dev.glimmer.engine.grammar;

import static dev.glimmer.engine.grammar.Expr.alt;
import static dev.glimmer.engine.grammar.Expr.byteRanges;
import static dev.glimmer.engine.grammar.Expr.literal;
import static dev.glimmer.engine.grammar.Expr.seq;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * How a string value is written in the output: as a JSON string literal (quoted, with escapes), or
 * raw, as GLM-4.7 writes a string argument of a tool call between {@code <arg_value>} and
 * {@code </arg_value>} (no quotes, no escapes; a free character is never {@code <}, so that the
 * value cannot run into a tag).
 */
enum StringForm {
    JSON,
    RAW;

    /** Any non-ASCII character as valid UTF-8 (no overlong forms, no surrogates). */
    static final Expr UTF8_MULTIBYTE = alt(
            seq(byteRanges(0xC2, 0xDF), continuation()),
            seq(byteRanges(0xE0, 0xE0), byteRanges(0xA0, 0xBF), continuation()),
            seq(byteRanges(0xE1, 0xEC, 0xEE, 0xEF), continuation(), continuation()),
            seq(byteRanges(0xED, 0xED), byteRanges(0x80, 0x9F), continuation()),
            seq(byteRanges(0xF0, 0xF0), byteRanges(0x90, 0xBF), continuation(), continuation()),
            seq(byteRanges(0xF1, 0xF3), continuation(), continuation(), continuation()),
            seq(byteRanges(0xF4, 0xF4), byteRanges(0x80, 0x8F), continuation(), continuation()));

    private static final Expr HEX = byteRanges('0', '9', 'a', 'f', 'A', 'F');

    /** Any character of a JSON string: printable ASCII but {@code "} and {@code \}, UTF-8, or an escape. */
    private static final Expr JSON_CHAR = alt(
            byteRanges(0x20, 0x21, 0x23, 0x5B, 0x5D, 0x7F),
            UTF8_MULTIBYTE,
            seq(literal("\\"), alt(Expr.byteClass(members("\"\\/bfnrt")), seq(literal("u"), HEX, HEX, HEX, HEX))));

    /** Any character of a raw value: tab, newlines, printable ASCII but {@code <}, UTF-8. */
    private static final Expr RAW_CHAR =
            alt(byteRanges(0x09, 0x0A, 0x0D, 0x0D, 0x20, 0x3B, 0x3D, 0x7F), UTF8_MULTIBYTE);

    private static Expr continuation() {
        return byteRanges(0x80, 0xBF);
    }

    /** One character of any kind. */
    Expr anyChar() {
        return this == JSON ? JSON_CHAR : RAW_CHAR;
    }

    /** The whole value around {@code content} (the characters): quotes for JSON. */
    Expr quoted(Expr content) {
        return this == JSON ? seq(literal("\""), content, literal("\"")) : content;
    }

    /** Exactly the string {@code value}, written in this form. */
    Expr exactly(String value) {
        if (this == RAW) {
            return literal(value);
        }
        StringBuilder s = new StringBuilder("\"");
        value.codePoints().forEach(cp -> s.append(jsonChar(cp)));
        return literal(s.append('"').toString());
    }

    /**
     * One character out of a set: the ASCII members as given ({@code ascii[c]}), plus every
     * non-ASCII character when {@code nonAscii}. Characters JSON escapes become their escapes; control
     * characters other than tab and newlines are left out, and so is {@code <} in a raw value.
     */
    Expr oneOf(boolean[] ascii, boolean nonAscii) {
        boolean[] plain = new boolean[256];
        List<Expr> choices = new ArrayList<>();
        boolean anyPlain = false;
        for (int c = 0; c < 128; c++) {
            if (!ascii[c]) {
                continue;
            }
            boolean control = c < 0x20 && c != '\t' && c != '\n' && c != '\r';
            if (control || this == RAW && c == '<') {
                continue;
            }
            boolean escaped = this == JSON && (c < 0x20 || c == '"' || c == '\\');
            if (escaped) {
                choices.add(literal(jsonChar(c)));
            } else {
                plain[c] = true;
                anyPlain = true;
            }
        }
        if (anyPlain) {
            choices.add(Expr.byteClass(plain));
        }
        if (nonAscii) {
            choices.add(UTF8_MULTIBYTE);
        }
        if (choices.isEmpty()) {
            return null;
        }
        return alt(choices);
    }

    /** The character {@code cp} written in this form (JSON escapes quotes, backslashes and control characters). */
    Expr character(int cp) {
        return literal(this == JSON ? jsonChar(cp) : Character.toString(cp));
    }

    private static String jsonChar(int cp) {
        return switch (cp) {
            case '"' -> "\\\"";
            case '\\' -> "\\\\";
            case '\n' -> "\\n";
            case '\r' -> "\\r";
            case '\t' -> "\\t";
            case '\b' -> "\\b";
            case '\f' -> "\\f";
            default -> cp < 0x20 ? String.format("\\u%04x", cp) : Character.toString(cp);
        };
    }

    private static boolean[] members(String chars) {
        boolean[] m = new boolean[256];
        for (byte b : chars.getBytes(StandardCharsets.US_ASCII)) {
            m[b] = true;
        }
        return m;
    }
}
