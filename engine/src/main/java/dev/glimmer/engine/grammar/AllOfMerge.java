package dev.glimmer.engine.grammar;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.BiFunction;

/**
 * {@code allOf}: its subschemas (and the keywords beside it) merged into the one schema that accepts
 * what all of them accept, which {@link JsonSchemaGrammar} then compiles. Types intersect
 * ({@code integer} within {@code number}); properties add up, a property in several subschemas being
 * the {@code allOf} of its schemas; {@code required} adds up; a subschema with
 * {@code additionalProperties: false} keeps out the properties only others declare; numeric and length
 * bounds take the strictest; {@code enum}/{@code const} intersect; {@code $ref}s are followed and
 * {@code anyOf}/{@code oneOf} inside are multiplied out (one merge per choice). What cannot be merged
 * into one schema of the supported subset (two different patterns or formats, an enum beside other
 * constraints, schemas of additional properties beside properties) is refused with an
 * {@link UnsupportedSchemaException} naming {@code allOf}.
 */
final class AllOfMerge {
    /** At most this many merges for the choices of {@code anyOf}s inside one {@code allOf}. */
    private static final int MAX_CHOICES = 64;

    private static final int MAX_REF_HOPS = 32;
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
    /** Keywords that do not take part: the allOf itself, the definitions $refs point into, annotations. */
    private static final Set<String> NOT_MERGED;

    static {
        Set<String> notMerged = new HashSet<>(JsonSchemaGrammar.ANNOTATIONS);
        notMerged.addAll(List.of("allOf", "$defs", "definitions"));
        NOT_MERGED = Set.copyOf(notMerged);
    }

    private final BiFunction<JsonNode, String, JsonNode> resolveRef;
    private final String where;

    /**
     * @param resolveRef the schema a {@code $ref} value points to (its second argument: where, for messages)
     */
    private AllOfMerge(BiFunction<JsonNode, String, JsonNode> resolveRef, String where) {
        this.resolveRef = resolveRef;
        this.where = where;
    }

    /** {@code schema}, which has {@code allOf}, as one schema without it. */
    static JsonNode merge(JsonNode schema, String where, BiFunction<JsonNode, String, JsonNode> resolveRef) {
        AllOfMerge m = new AllOfMerge(resolveRef, where + "/allOf");
        JsonNode subs = schema.get("allOf");
        if (!subs.isArray() || subs.isEmpty()) {
            throw m.refuse("allOf must be a non-empty array of schemas");
        }
        List<JsonNode> members = new ArrayList<>();
        m.flatten(schema, members, 0);
        JsonNode merged = m.mergeAll(members);
        if (merged == null) {
            throw m.refuse("no value satisfies all its subschemas (no type, or no enum value, in common)");
        }
        return merged;
    }

    private UnsupportedSchemaException refuse(String detail) {
        return new UnsupportedSchemaException("allOf", where, detail);
    }

    /** Adds the plain schemas {@code schema} is the conjunction of: its allOf's members, followed $refs. */
    private void flatten(JsonNode schema, List<JsonNode> out, int hops) {
        if (hops > MAX_REF_HOPS) {
            throw refuse("allOf's $refs lead in a circle");
        }
        if (schema.isBoolean()) {
            if (!schema.booleanValue()) {
                throw refuse("allOf holds the schema false, which accepts no value");
            }
            return;
        }
        if (!schema.isObject()) {
            throw refuse("allOf must hold schemas (objects or booleans)");
        }
        ObjectNode rest = NODES.objectNode();
        schema.properties().forEach(e -> {
            if (!NOT_MERGED.contains(e.getKey()) && !e.getKey().equals("$ref")) {
                rest.set(e.getKey(), e.getValue());
            }
        });
        if (!rest.isEmpty()) {
            out.add(rest);
        }
        if (schema.has("$ref")) {
            flatten(resolveRef.apply(schema.get("$ref"), where), out, hops + 1);
        }
        if (schema.has("allOf")) {
            JsonNode subs = schema.get("allOf");
            if (!subs.isArray()) {
                throw refuse("allOf must be an array of schemas");
            }
            for (JsonNode s : subs) {
                flatten(s, out, hops + 1);
            }
        }
    }

    /** The merge of plain {@code members}; null when no value satisfies them all. */
    private JsonNode mergeAll(List<JsonNode> members) {
        // allOf[..., anyOf[A, B], ...] is anyOf[allOf[..., A, ...], allOf[..., B, ...]].
        for (int i = 0; i < members.size(); i++) {
            JsonNode m = members.get(i);
            String choice = m.has("anyOf") ? "anyOf" : m.has("oneOf") ? "oneOf" : null;
            if (choice == null) {
                continue;
            }
            JsonNode choices = m.get(choice);
            if (!choices.isArray() || choices.isEmpty()) {
                throw refuse(choice + " must be a non-empty array of schemas");
            }
            ArrayNode merged = NODES.arrayNode();
            ObjectNode without = m.deepCopy();
            without.remove(choice);
            for (JsonNode c : choices) {
                List<JsonNode> with = new ArrayList<>(members);
                with.set(i, without);
                flatten(c, with, 0);
                JsonNode one = mergeAll(with);
                if (one != null) {
                    merged.add(one); // a choice that contradicts the others is left out
                }
                if (merged.size() > MAX_CHOICES) {
                    throw refuse("the anyOf/oneOf inside allOf make more than " + MAX_CHOICES + " combinations");
                }
            }
            return merged.isEmpty() ? null : NODES.objectNode().set("anyOf", merged);
        }
        return mergePlain(members);
    }

    /** Members without $ref, allOf, anyOf or oneOf; null when no value satisfies them all. */
    private JsonNode mergePlain(List<JsonNode> members) {
        ObjectNode out = NODES.objectNode();
        Set<String> types = null;
        Map<String, List<JsonNode>> properties = new LinkedHashMap<>();
        Set<String> required = new LinkedHashSet<>();
        Set<String> allowedNames = null;
        JsonNode additionalSchema = null;
        List<JsonNode> items = new ArrayList<>();
        List<JsonNode> fixedValues = null;
        for (JsonNode m : members) {
            for (Map.Entry<String, JsonNode> e : m.properties()) {
                String k = e.getKey();
                JsonNode v = e.getValue();
                switch (k) {
                    case "type" -> types = intersect(types, typesOf(v));
                    case "properties" -> {
                        if (!v.isObject()) {
                            throw refuse("properties must be an object");
                        }
                        v.properties()
                                .forEach(p -> properties
                                        .computeIfAbsent(p.getKey(), n -> new ArrayList<>())
                                        .add(p.getValue()));
                    }
                    case "required" -> v.forEach(n -> required.add(n.asText()));
                    case "additionalProperties" -> {
                        if (v.isBoolean() && !v.booleanValue()) {
                            Set<String> own = new LinkedHashSet<>();
                            m.path("properties").fieldNames().forEachRemaining(own::add);
                            if (allowedNames != null) {
                                own.retainAll(allowedNames);
                            }
                            allowedNames = own;
                        } else if (v.isObject()) {
                            if (additionalSchema != null) {
                                throw refuse("two schemas of additionalProperties cannot be merged");
                            }
                            additionalSchema = v;
                        }
                    }
                    case "items" -> items.add(v);
                    case "enum", "const" -> {
                        List<JsonNode> values = new ArrayList<>();
                        if (k.equals("const")) {
                            values.add(v);
                        } else {
                            v.forEach(values::add);
                        }
                        fixedValues = fixedValues == null
                                ? values
                                : new ArrayList<>(fixedValues.stream()
                                        .filter(values::contains)
                                        .toList());
                    }
                    case "minimum", "exclusiveMinimum", "minLength", "minItems" -> strictest(out, k, v, true);
                    case "maximum", "exclusiveMaximum", "maxLength", "maxItems" -> strictest(out, k, v, false);
                    default -> {
                        // pattern, format and keywords the compiler refuses: equal values merge, others do not.
                        if (out.has(k) && !out.get(k).equals(v)) {
                            throw refuse("two different values of '" + k + "' cannot be merged");
                        }
                        out.set(k, v);
                    }
                }
            }
        }
        if (types != null) {
            if (types.isEmpty()) {
                return null;
            }
            ArrayNode t = NODES.arrayNode();
            types.forEach(t::add);
            out.set("type", t);
        }
        if (fixedValues != null) {
            for (String k : names(out)) {
                if (!k.equals("type")) {
                    throw refuse("enum or const beside other constraints ('" + k + "') cannot be merged");
                }
            }
            Set<String> allowed = types;
            List<JsonNode> values = fixedValues.stream()
                    .filter(v -> allowed == null
                            || allowed.contains(typeOf(v))
                            || allowed.contains("number") && typeOf(v).equals("integer"))
                    .toList();
            if (values.isEmpty()) {
                return null;
            }
            ObjectNode e = NODES.objectNode();
            e.set("enum", NODES.arrayNode().addAll(values));
            return e;
        }
        if (!properties.isEmpty() || allowedNames != null) {
            if (additionalSchema != null) {
                throw refuse("a schema of additionalProperties beside properties cannot be merged");
            }
            ObjectNode props = NODES.objectNode();
            for (Map.Entry<String, List<JsonNode>> p : properties.entrySet()) {
                if (allowedNames != null && !allowedNames.contains(p.getKey())) {
                    continue; // a subschema with additionalProperties false keeps it out
                }
                List<JsonNode> schemas = p.getValue();
                props.set(
                        p.getKey(),
                        schemas.size() == 1
                                ? schemas.getFirst()
                                : NODES.objectNode()
                                        .set("allOf", NODES.arrayNode().addAll(schemas)));
            }
            for (String name : required) {
                if (!props.has(name)) {
                    throw refuse("'" + name + "' is required but another subschema does not allow it");
                }
            }
            out.set("properties", props);
            if (!required.isEmpty()) {
                ArrayNode r = NODES.arrayNode();
                required.forEach(r::add);
                out.set("required", r);
            }
            if (allowedNames != null) {
                out.put("additionalProperties", false);
            }
        } else {
            if (!required.isEmpty()) {
                ArrayNode r = NODES.arrayNode();
                required.forEach(r::add);
                out.set("required", r);
            }
            if (additionalSchema != null) {
                out.set("additionalProperties", additionalSchema);
            }
        }
        if (!items.isEmpty()) {
            out.set(
                    "items",
                    items.size() == 1
                            ? items.getFirst()
                            : NODES.objectNode().set("allOf", NODES.arrayNode().addAll(items)));
        }
        return out;
    }

    private static List<String> names(ObjectNode o) {
        List<String> names = new ArrayList<>();
        o.fieldNames().forEachRemaining(names::add);
        return names;
    }

    /** Keeps the larger lower bound ({@code lower}) or the smaller upper bound of {@code k}. */
    private void strictest(ObjectNode out, String k, JsonNode v, boolean lower) {
        if (!v.isNumber()) {
            throw refuse(k + " must be a number, got " + v);
        }
        JsonNode old = out.get(k);
        if (old == null) {
            out.set(k, v);
            return;
        }
        int order = v.decimalValue().compareTo(old.decimalValue());
        if (lower ? order > 0 : order < 0) {
            out.set(k, v);
        }
    }

    private Set<String> typesOf(JsonNode type) {
        Set<String> types = new LinkedHashSet<>();
        for (JsonNode t : type.isArray() ? type : List.of(type)) {
            if (!t.isTextual() || !JsonSchemaGrammar.TYPES.contains(t.textValue())) {
                throw new UnsupportedSchemaException(
                        "type", where, "type " + t + " is not one of " + JsonSchemaGrammar.TYPES);
            }
            types.add(t.textValue());
        }
        return types;
    }

    /** The types both allow; {@code integer} is within {@code number}. */
    private static Set<String> intersect(Set<String> a, Set<String> b) {
        if (a == null) {
            return b;
        }
        Set<String> both = new LinkedHashSet<>();
        for (String t : a) {
            if (b.contains(t)) {
                both.add(t);
            } else if (t.equals("integer") && b.contains("number") || t.equals("number") && b.contains("integer")) {
                both.add("integer");
            }
        }
        return both;
    }

    private static String typeOf(JsonNode v) {
        if (v.isNull()) {
            return "null";
        }
        if (v.isBoolean()) {
            return "boolean";
        }
        if (v.isIntegralNumber()
                || v.isNumber() && v.decimalValue().stripTrailingZeros().scale() <= 0) {
            return "integer";
        }
        return v.isNumber() ? "number" : v.isTextual() ? "string" : v.isArray() ? "array" : "object";
    }
}
