package dev.glimmer.engine.grammar;

import static dev.glimmer.engine.grammar.Expr.alt;
import static dev.glimmer.engine.grammar.Expr.byteRanges;
import static dev.glimmer.engine.grammar.Expr.empty;
import static dev.glimmer.engine.grammar.Expr.literal;
import static dev.glimmer.engine.grammar.Expr.optional;
import static dev.glimmer.engine.grammar.Expr.repeat;
import static dev.glimmer.engine.grammar.Expr.seq;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Compiles a JSON schema into the grammar of the JSON texts it accepts. The supported subset:
 * {@code type} (one or a list), {@code properties}, {@code required}, {@code additionalProperties}
 * ({@code false}; without {@code properties} also {@code true} or a schema), {@code enum},
 * {@code const}, {@code anyOf} / {@code oneOf} (both read as "any of"), {@code items},
 * {@code minItems} / {@code maxItems}, {@code minLength} / {@code maxLength}, {@code pattern}
 * ({@link RegexGrammar}'s subset), {@code format} ({@link FormatGrammar}'s formats),
 * {@code minimum} / {@code maximum} / {@code exclusiveMinimum} / {@code exclusiveMaximum} on integers and
 * numbers ({@link NumberRange}), {@code allOf} ({@link AllOfMerge}), {@code $ref} to {@code #},
 * {@code #/$defs/…} or {@code #/definitions/…}, and annotations (title, description, …), which change
 * nothing. Any other keyword is refused with an {@link UnsupportedSchemaException} that names it.
 *
 * <p>What the output looks like: properties come in the schema's order, the required ones always
 * and the others perhaps; an object with {@code properties} holds no others (as if
 * {@code additionalProperties} were false); whitespace is what JSON allows between tokens, at most
 * a space or a newline and 20 spaces or tabs at a time; numbers have at most 16 integer digits,
 * 15 fraction digits and a 3-digit exponent (a number with bounds has no exponent).
 */
public final class JsonSchemaGrammar {
    /** Keywords that describe and change nothing (AllOfMerge leaves them out too). */
    static final Set<String> ANNOTATIONS = Set.of(
            "title",
            "description",
            "default",
            "examples",
            "$comment",
            "$schema",
            "$id",
            "deprecated",
            "readOnly",
            "writeOnly");

    private static final Set<String> KEYWORDS = Set.of(
            "type",
            "properties",
            "required",
            "additionalProperties",
            "enum",
            "const",
            "anyOf",
            "oneOf",
            "items",
            "minItems",
            "maxItems",
            "minLength",
            "maxLength",
            "pattern",
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "$ref",
            "$defs",
            "definitions",
            "format",
            "allOf");
    static final Set<String> TYPES = Set.of("null", "boolean", "integer", "number", "string", "array", "object");
    /** The largest minLength, maxLength, minItems or maxItems: a limit on the output, not on the schema's author. */
    private static final int MAX_COUNT = 100_000;
    /** The widest integer range (16 digits, as for unbounded integers). */
    private static final long INTEGER_LIMIT = 9_999_999_999_999_999L;

    private static final ObjectMapper JSON = new ObjectMapper();

    /** Whitespace between JSON tokens: nothing, a space, or a newline and some indentation. */
    static final Expr WS =
            alt(empty(), literal(" "), seq(literal("\n"), repeat(byteRanges(' ', ' ', '\t', '\t'), 0, 20)));

    private static final Expr DIGIT = byteRanges('0', '9');
    private static final Expr INTEGER =
            seq(optional(literal("-")), alt(literal("0"), seq(byteRanges('1', '9'), repeat(DIGIT, 0, 15))));
    private static final Expr NUMBER = seq(
            INTEGER,
            optional(seq(literal("."), repeat(DIGIT, 1, 15))),
            optional(seq(
                    byteRanges('e', 'e', 'E', 'E'), optional(byteRanges('+', '+', '-', '-')), repeat(DIGIT, 1, 3))));
    private static final Expr ANY_STRING = StringForm.JSON.quoted(repeat(StringForm.JSON.anyChar(), 0, -1));

    private final JsonNode root;
    private final Map<String, Expr.Rule> refs = new HashMap<>();
    private Expr.Rule anyValue;

    private JsonSchemaGrammar(JsonNode root) {
        this.root = root;
    }

    /** A compiler for the schemas in {@code root} (which {@code $ref}s point into). */
    public static JsonSchemaGrammar of(JsonNode root) {
        return new JsonSchemaGrammar(root);
    }

    /** The JSON texts {@code root} accepts. */
    public static Expr forSchema(JsonNode root) {
        return of(root).value(root, "");
    }

    /** Any JSON object ({@code response_format} {@code json_object}). */
    public static Expr anyObject() {
        return new JsonSchemaGrammar(JSON.createObjectNode()).object(JSON.createObjectNode(), "");
    }

    /** A property of an object schema, in the schema's order. */
    public record Property(String name, boolean required, JsonNode schema) {}

    /**
     * The properties an object schema allows, for output that writes them in its own syntax (GLM's
     * tool calls): it must be an object schema whose properties are all there may be.
     */
    public List<Property> properties(JsonNode schema, String where) {
        checkKeywords(schema, where);
        if (schema.has("allOf")) {
            schema = mergeAllOf(schema, where);
            checkKeywords(schema, where);
        }
        if (schema.has("type") && !schema.get("type").asText().equals("object")) {
            throw new UnsupportedSchemaException(
                    "type",
                    where,
                    "the schema of a tool's parameters must be of type" + " object, not " + schema.get("type"));
        }
        for (String k : List.of("anyOf", "oneOf", "enum", "const", "$ref")) {
            if (schema.has(k)) {
                throw new UnsupportedSchemaException(
                        k,
                        where,
                        "'" + k + "' at the top of a tool's parameters is not"
                                + " supported; describe the parameters with properties");
            }
        }
        JsonNode additional = schema.get("additionalProperties");
        if (additional != null && !additional.isBoolean()) {
            throw new UnsupportedSchemaException(
                    "additionalProperties",
                    where,
                    "additionalProperties other than true" + " or false in a tool's parameters is not supported");
        }
        return declaredProperties(schema, where);
    }

    /** The JSON texts {@code schema} accepts; {@code where} is its JSON pointer, for messages. */
    public Expr value(JsonNode schema, String where) {
        if (schema.isBoolean()) {
            if (schema.booleanValue()) {
                return any();
            }
            throw new UnsupportedSchemaException("false", where, "the schema false accepts no value");
        }
        if (!schema.isObject()) {
            throw new UnsupportedSchemaException(
                    "schema",
                    where,
                    "a schema must be an object or a boolean, not "
                            + schema.getNodeType().toString().toLowerCase());
        }
        checkKeywords(schema, where);
        if (schema.has("$ref")) {
            onlyAnnotationsBeside("$ref", schema, where);
            return ref(schema.get("$ref"), where);
        }
        if (schema.has("allOf")) {
            return value(mergeAllOf(schema, where), where);
        }
        if (schema.has("const")) {
            return literal(json(schema.get("const")));
        }
        if (schema.has("enum")) {
            JsonNode values = schema.get("enum");
            if (!values.isArray() || values.isEmpty()) {
                throw new UnsupportedSchemaException("enum", where, "enum must be a non-empty array");
            }
            List<Expr> choices = new ArrayList<>();
            for (JsonNode v : values) {
                choices.add(literal(json(v)));
            }
            return alt(choices);
        }
        for (String k : List.of("anyOf", "oneOf")) {
            if (schema.has(k)) {
                onlyAnnotationsBeside(k, schema, where);
                JsonNode subs = schema.get(k);
                if (!subs.isArray() || subs.isEmpty()) {
                    throw new UnsupportedSchemaException(k, where, k + " must be a non-empty array of schemas");
                }
                List<Expr> choices = new ArrayList<>();
                for (int i = 0; i < subs.size(); i++) {
                    choices.add(value(subs.get(i), where + "/" + k + "/" + i));
                }
                return alt(choices);
            }
        }
        List<Expr> choices = new ArrayList<>();
        for (String type : types(schema, where)) {
            choices.add(
                    switch (type) {
                        case "null" -> literal("null");
                        case "boolean" -> alt(literal("true"), literal("false"));
                        case "integer" -> integer(schema, where);
                        case "number" -> number(schema, where);
                        case "string" -> string(schema, StringForm.JSON, where);
                        case "array" -> array(schema, where);
                        case "object" -> object(schema, where);
                        default -> throw new IllegalStateException(type);
                    });
        }
        return alt(choices);
    }

    /**
     * A string value written raw (GLM's string arguments of a tool call): {@code enum} and
     * {@code const} of strings, the length limits or a pattern; other keywords of the schema are
     * those of its other types and do not apply.
     */
    public Expr rawString(JsonNode schema, String where) {
        for (int hops = 0; schema.isObject() && schema.has("$ref"); hops++) {
            if (hops == 32) {
                throw new UnsupportedSchemaException("$ref", where, "$ref leads in a circle");
            }
            String pointer = refPointer(schema.get("$ref"), where);
            where = pointer;
            schema = resolve(pointer);
        }
        if (!schema.isObject()) {
            return StringForm.RAW.quoted(repeat(StringForm.RAW.anyChar(), 0, -1));
        }
        checkKeywords(schema, where);
        if (schema.has("allOf")) {
            return rawString(mergeAllOf(schema, where), where);
        }
        List<JsonNode> fixed = new ArrayList<>();
        if (schema.has("const")) {
            fixed.add(schema.get("const"));
        } else if (schema.has("enum")) {
            schema.get("enum").forEach(fixed::add);
        }
        if (!fixed.isEmpty()) {
            List<Expr> choices = new ArrayList<>();
            for (JsonNode v : fixed) {
                if (v.isTextual()) {
                    choices.add(StringForm.RAW.exactly(v.textValue()));
                }
            }
            if (choices.isEmpty()) {
                throw new UnsupportedSchemaException(
                        "enum", where, "a string parameter's enum or const holds no string");
            }
            return alt(choices);
        }
        return string(schema, StringForm.RAW, where);
    }

    private Expr ref(JsonNode ref, String where) {
        String pointer = refPointer(ref, where);
        Expr.Rule rule = refs.get(pointer);
        if (rule == null) {
            rule = Expr.rule(pointer);
            refs.put(pointer, rule);
            rule.define(value(resolve(pointer), pointer));
        }
        return rule;
    }

    private JsonNode mergeAllOf(JsonNode schema, String where) {
        return AllOfMerge.merge(schema, where, (ref, at) -> resolve(refPointer(ref, at)));
    }

    private static String refPointer(JsonNode ref, String where) {
        String text = ref.asText();
        if (!ref.isTextual()
                || !(text.equals("#") || text.startsWith("#/$defs/") || text.startsWith("#/definitions/"))) {
            throw new UnsupportedSchemaException(
                    "$ref",
                    where,
                    "$ref " + ref + " is not supported: only '#'," + " '#/$defs/…' and '#/definitions/…' are");
        }
        return text.substring(1);
    }

    private JsonNode resolve(String pointer) {
        JsonNode target = pointer.isEmpty() ? root : root.at(pointer);
        if (target.isMissingNode()) {
            throw new UnsupportedSchemaException("$ref", pointer, "$ref '#" + pointer + "' points to nothing");
        }
        return target;
    }

    private static void checkKeywords(JsonNode schema, String where) {
        for (String name : (Iterable<String>) schema::fieldNames) {
            if (!KEYWORDS.contains(name) && !ANNOTATIONS.contains(name)) {
                throw new UnsupportedSchemaException(
                        name, where, "the JSON schema keyword '" + name + "' is not supported");
            }
        }
    }

    private static void onlyAnnotationsBeside(String keyword, JsonNode schema, String where) {
        for (String name : (Iterable<String>) schema::fieldNames) {
            if (!name.equals(keyword)
                    && !ANNOTATIONS.contains(name)
                    && !name.equals("$defs")
                    && !name.equals("definitions")) {
                throw new UnsupportedSchemaException(
                        name, where, "'" + name + "' next to '" + keyword + "' is not supported");
            }
        }
    }

    /** The types a schema allows: its {@code type}, or what its keywords imply, or all. */
    private static Set<String> types(JsonNode schema, String where) {
        JsonNode type = schema.get("type");
        Set<String> types = new LinkedHashSet<>();
        if (type == null) {
            if (schema.has("properties") || schema.has("required") || schema.has("additionalProperties")) {
                types.add("object");
            }
            if (schema.has("items") || schema.has("minItems") || schema.has("maxItems")) {
                types.add("array");
            }
            if (schema.has("minLength") || schema.has("maxLength") || schema.has("pattern") || schema.has("format")) {
                types.add("string");
            }
            if (schema.has("minimum")
                    || schema.has("maximum")
                    || schema.has("exclusiveMinimum")
                    || schema.has("exclusiveMaximum")) {
                types.add("number");
            }
            return types.isEmpty() ? TYPES : types;
        }
        for (JsonNode t : type.isArray() ? type : List.of(type)) {
            if (!t.isTextual() || !TYPES.contains(t.textValue())) {
                throw new UnsupportedSchemaException("type", where, "type " + t + " is not one of " + TYPES);
            }
            types.add(t.textValue());
        }
        if (types.isEmpty()) {
            throw new UnsupportedSchemaException("type", where, "type is an empty list");
        }
        return types;
    }

    /** Any JSON value (a schema that says nothing): a recursive rule, one per compiler. */
    private Expr any() {
        if (anyValue == null) {
            anyValue = Expr.rule("any value");
            anyValue.define(alt(
                    objectOf(anyValue),
                    arrayOf(anyValue, 0, -1),
                    ANY_STRING,
                    NUMBER,
                    literal("true"),
                    literal("false"),
                    literal("null")));
        }
        return anyValue;
    }

    private Expr integer(JsonNode schema, String where) {
        long min = -INTEGER_LIMIT;
        long max = INTEGER_LIMIT;
        boolean bounded = false;
        for (String k : List.of("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")) {
            JsonNode bound = schema.get(k);
            if (bound == null) {
                continue;
            }
            if (!bound.isNumber() || Math.abs(bound.doubleValue()) > INTEGER_LIMIT) {
                throw new UnsupportedSchemaException(
                        k, where, k + " must be a number of at most 16 digits, got " + bound);
            }
            double v = bound.doubleValue();
            bounded = true;
            switch (k) {
                case "minimum" -> min = Math.max(min, (long) Math.ceil(v));
                case "exclusiveMinimum" -> min = Math.max(min, (long) Math.floor(v) + 1);
                case "maximum" -> max = Math.min(max, (long) Math.floor(v));
                default -> max = Math.min(max, (long) Math.ceil(v) - 1);
            }
        }
        if (min > max) {
            throw new UnsupportedSchemaException(
                    "minimum", where, "no integer lies between the minimum and the maximum");
        }
        return bounded ? Expr.integerRange(min, max) : INTEGER;
    }

    /**
     * A number; with bounds, one between them written without an exponent ({@link NumberRange}), the
     * inclusive and exclusive bounds of each side taken together.
     */
    private static Expr number(JsonNode schema, String where) {
        BigDecimal limit = BigDecimal.valueOf(INTEGER_LIMIT);
        BigDecimal min = limit.negate();
        boolean minInclusive = true;
        BigDecimal max = limit;
        boolean maxInclusive = true;
        boolean bounded = false;
        for (String k : List.of("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")) {
            JsonNode bound = schema.get(k);
            if (bound == null) {
                continue;
            }
            if (!bound.isNumber() || bound.decimalValue().abs().compareTo(limit) > 0) {
                throw new UnsupportedSchemaException(
                        k, where, k + " must be a number of at most 16 integer digits, got " + bound);
            }
            BigDecimal v = bound.decimalValue();
            bounded = true;
            boolean exclusive = k.startsWith("exclusive");
            if (k.endsWith("inimum")) {
                int order = v.compareTo(min);
                if (order > 0 || order == 0 && exclusive) {
                    min = v;
                    minInclusive = !exclusive;
                }
            } else {
                int order = v.compareTo(max);
                if (order < 0 || order == 0 && exclusive) {
                    max = v;
                    maxInclusive = !exclusive;
                }
            }
        }
        if (!bounded) {
            return NUMBER;
        }
        Expr range = NumberRange.of(min, minInclusive, max, maxInclusive);
        if (range == null) {
            throw new UnsupportedSchemaException(
                    "minimum", where, "no number lies between the minimum and the maximum");
        }
        return range;
    }

    private static Expr string(JsonNode schema, StringForm form, String where) {
        int minLength = count(schema, "minLength", 0, where);
        int maxLength = count(schema, "maxLength", -1, where);
        JsonNode pattern = schema.get("pattern");
        JsonNode format = schema.get("format");
        if (format != null) {
            return form.quoted(format(schema, format, minLength, maxLength, where));
        }
        if (pattern != null) {
            if (!pattern.isTextual()) {
                throw new UnsupportedSchemaException("pattern", where, "pattern must be a string");
            }
            if (schema.has("minLength") || schema.has("maxLength")) {
                throw new UnsupportedSchemaException(
                        "pattern",
                        where,
                        "pattern together with minLength or maxLength"
                                + " is not supported; put the length into the pattern");
            }
            return form.quoted(RegexGrammar.compile(pattern.textValue(), form, where + "/pattern"));
        }
        if (maxLength >= 0 && maxLength < minLength) {
            throw new UnsupportedSchemaException("maxLength", where, "maxLength is smaller than minLength");
        }
        return form.quoted(maxLength == 0 ? empty() : repeat(form.anyChar(), minLength, maxLength));
    }

    /** The characters of a string of {@code format} ({@link FormatGrammar}), within the length limits if they allow all of them. */
    private static Expr format(JsonNode schema, JsonNode format, int minLength, int maxLength, String where) {
        Expr grammar = format.isTextual() ? FormatGrammar.of(format.textValue()) : null;
        if (grammar == null) {
            throw new UnsupportedSchemaException(
                    "format",
                    where,
                    "format " + format + " is not supported; the" + " supported formats are "
                            + String.join(", ", FormatGrammar.names()));
        }
        if (schema.has("pattern")) {
            throw new UnsupportedSchemaException("pattern", where, "pattern together with format is not supported");
        }
        FormatGrammar.Length length = FormatGrammar.Length.of(grammar);
        if (minLength > length.min() || maxLength >= 0 && maxLength < length.max()) {
            String keyword = minLength > length.min() ? "minLength" : "maxLength";
            throw new UnsupportedSchemaException(
                    keyword,
                    where,
                    keyword + " together with format " + format
                            + " is supported only when it allows every text of the format (" + length.min() + " to "
                            + length.max() + " characters)");
        }
        return grammar;
    }

    private Expr array(JsonNode schema, String where) {
        JsonNode items = schema.get("items");
        Expr item = items == null ? any() : value(items, where + "/items");
        int min = count(schema, "minItems", 0, where);
        int max = count(schema, "maxItems", -1, where);
        if (max >= 0 && max < min) {
            throw new UnsupportedSchemaException("maxItems", where, "maxItems is smaller than minItems");
        }
        return arrayOf(item, min, max);
    }

    private static Expr arrayOf(Expr item, int min, int max) {
        if (max == 0) {
            return seq(literal("["), WS, literal("]"));
        }
        Expr element = seq(item, WS);
        Expr list = max == 1
                ? element
                : seq(element, repeat(seq(literal(","), WS, element), Math.max(min - 1, 0), max < 0 ? -1 : max - 1));
        return seq(literal("["), WS, min == 0 ? optional(list) : list, literal("]"));
    }

    private Expr object(JsonNode schema, String where) {
        JsonNode additional = schema.get("additionalProperties");
        if (schema.has("properties")) {
            if (additional != null && !(additional.isBoolean() && !additional.booleanValue())) {
                throw new UnsupportedSchemaException(
                        "additionalProperties",
                        where,
                        "additionalProperties other than"
                                + " false next to properties is not supported (the output holds the declared properties only)");
            }
            List<Expr> members = new ArrayList<>();
            List<Boolean> required = new ArrayList<>();
            for (Property p : declaredProperties(schema, where)) {
                members.add(seq(
                        StringForm.JSON.exactly(p.name()),
                        WS,
                        literal(":"),
                        WS,
                        value(p.schema(), where + "/properties/" + p.name()),
                        WS));
                required.add(p.required());
            }
            return seq(literal("{"), WS, someOf(members, required, seq(literal(","), WS)), literal("}"));
        }
        if (schema.has("required") && !schema.get("required").isEmpty()) {
            throw new UnsupportedSchemaException("required", where, "required without properties is not supported");
        }
        if (additional == null || additional.isBoolean() && additional.booleanValue()) {
            return objectOf(any());
        }
        if (additional.isBoolean()) {
            return seq(literal("{"), WS, literal("}"));
        }
        return objectOf(value(additional, where + "/additionalProperties"));
    }

    /** An object of any keys with values of {@code valueGrammar}. */
    private static Expr objectOf(Expr valueGrammar) {
        Expr member = seq(ANY_STRING, WS, literal(":"), WS, valueGrammar, WS);
        Expr members = seq(member, repeat(seq(literal(","), WS, member), 0, -1));
        return seq(literal("{"), WS, optional(members), literal("}"));
    }

    private static List<Property> declaredProperties(JsonNode schema, String where) {
        JsonNode properties = schema.path("properties");
        if (!properties.isMissingNode() && !properties.isObject()) {
            throw new UnsupportedSchemaException("properties", where, "properties must be an object");
        }
        Set<String> required = new LinkedHashSet<>();
        JsonNode req = schema.path("required");
        if (!req.isMissingNode()) {
            if (!req.isArray()) {
                throw new UnsupportedSchemaException("required", where, "required must be an array of names");
            }
            for (JsonNode name : req) {
                if (!name.isTextual() || !properties.has(name.textValue())) {
                    throw new UnsupportedSchemaException(
                            "required", where, "required names " + name + ", which is not among the properties");
                }
                required.add(name.textValue());
            }
        }
        List<Property> result = new ArrayList<>();
        for (Map.Entry<String, JsonNode> p : properties.properties()) {
            result.add(new Property(p.getKey(), required.contains(p.getKey()), p.getValue()));
        }
        return result;
    }

    /**
     * The members in order, each required one always and each other one perhaps, with
     * {@code separator} between those written. Built from the end: {@code after[i]} is the rest
     * once something was written (each member preceded by the separator), {@code first[i]} the rest
     * while nothing was.
     */
    public static Expr someOf(List<Expr> members, List<Boolean> required, Expr separator) {
        Expr after = empty();
        Expr first = empty();
        for (int i = members.size() - 1; i >= 0; i--) {
            Expr withSeparator = seq(separator, members.get(i), after);
            Expr asFirst = seq(members.get(i), after);
            after = required.get(i) ? withSeparator : alt(withSeparator, after);
            first = required.get(i) ? asFirst : alt(asFirst, first);
        }
        return first;
    }

    private static int count(JsonNode schema, String keyword, int absent, String where) {
        JsonNode n = schema.get(keyword);
        if (n == null) {
            return absent;
        }
        if (!n.isIntegralNumber() || !n.canConvertToInt() || n.intValue() < 0 || n.intValue() > MAX_COUNT) {
            throw new UnsupportedSchemaException(
                    keyword, where, keyword + " must be an integer from 0 to " + MAX_COUNT + ", got " + n);
        }
        return n.intValue();
    }

    private static String json(JsonNode value) {
        try {
            return JSON.writeValueAsString(value);
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }
}
