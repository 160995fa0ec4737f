package dev.glimmer.engine.gguf;

import dev.glimmer.engine.gguf.GgufValue.GgufArray;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalLong;

/**
 * The key/value metadata of a GGUF file, in file order, with typed accessors whose errors name the
 * key and the types involved.
 */
public final class GgufMetadata {
    private final Map<String, GgufValue> entries;

    public GgufMetadata(Map<String, GgufValue> entries) {
        this.entries = Collections.unmodifiableMap(new LinkedHashMap<>(entries));
    }

    /** Every entry in file order. */
    public Map<String, GgufValue> entries() {
        return entries;
    }

    public boolean has(String key) {
        return entries.containsKey(key);
    }

    public Optional<GgufValue> get(String key) {
        return Optional.ofNullable(entries.get(key));
    }

    public Optional<String> optString(String key) {
        return get(key).map(v -> expect(key, v, GgufValueType.STRING, String.class));
    }

    public String string(String key) {
        return optString(key).orElseThrow(() -> missing(key));
    }

    /** An integer of any integer type. */
    public OptionalLong optInteger(String key) {
        GgufValue v = entries.get(key);
        if (v == null) {
            return OptionalLong.empty();
        }
        if (!v.type().integer()) {
            throw wrongType(key, v, "an integer");
        }
        return OptionalLong.of((Long) v.value());
    }

    public long integer(String key) {
        return optInteger(key).orElseThrow(() -> missing(key));
    }

    /** A number of any numeric type (integers and floats), as a double. */
    public OptionalDouble optNumber(String key) {
        GgufValue v = entries.get(key);
        if (v == null) {
            return OptionalDouble.empty();
        }
        return switch (v.value()) {
            case Long l -> OptionalDouble.of(l);
            case Float f -> OptionalDouble.of(f);
            case Double d -> OptionalDouble.of(d);
            default -> throw wrongType(key, v, "a number");
        };
    }

    public double number(String key) {
        return optNumber(key).orElseThrow(() -> missing(key));
    }

    public Optional<Boolean> optBool(String key) {
        return get(key).map(v -> expect(key, v, GgufValueType.BOOL, Boolean.class));
    }

    public Optional<GgufArray> optArray(String key) {
        return get(key).map(v -> expect(key, v, GgufValueType.ARRAY, GgufArray.class));
    }

    public GgufArray array(String key) {
        return optArray(key).orElseThrow(() -> missing(key));
    }

    public String[] stringArray(String key) {
        GgufArray a = array(key);
        if (a.elementType() != GgufValueType.STRING) {
            throw new GgufFormatException("metadata key " + key + " should be an array of strings, is an array of "
                    + a.elementType().name().toLowerCase());
        }
        return (String[]) a.values();
    }

    /** An array of any integer type. */
    public long[] integerArray(String key) {
        GgufArray a = array(key);
        if (!a.elementType().integer()) {
            throw new GgufFormatException("metadata key " + key + " should be an array of integers, is an array of "
                    + a.elementType().name().toLowerCase());
        }
        return (long[]) a.values();
    }

    public float[] floatArray(String key) {
        GgufArray a = array(key);
        if (a.elementType() != GgufValueType.FLOAT32) {
            throw new GgufFormatException("metadata key " + key + " should be an array of float32, is an array of "
                    + a.elementType().name().toLowerCase());
        }
        return (float[]) a.values();
    }

    private static <T> T expect(String key, GgufValue v, GgufValueType type, Class<T> cls) {
        if (v.type() != type) {
            throw wrongType(key, v, type.name().toLowerCase());
        }
        return cls.cast(v.value());
    }

    private static GgufFormatException wrongType(String key, GgufValue v, String expected) {
        return new GgufFormatException("metadata key " + key + " should be " + expected + ", is "
                + v.type().name().toLowerCase());
    }

    private static GgufFormatException missing(String key) {
        return new GgufFormatException("metadata key " + key + " is missing");
    }
}
