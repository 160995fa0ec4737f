package dev.glimmer.engine.gguf;

import java.util.Arrays;

/**
 * One metadata value with its GGUF type. {@code value} holds, by type:
 * integers → {@link Long} (unsigned 64-bit values above {@code Long.MAX_VALUE} wrap, as in Java),
 * FLOAT32 → {@link Float}, FLOAT64 → {@link Double}, BOOL → {@link Boolean}, STRING → {@link String},
 * ARRAY → {@link GgufArray}.
 */
public record GgufValue(GgufValueType type, Object value) {

    // One factory per value type that the writers use: the type is named once, at the call.
    public static GgufValue of(String s) {
        return new GgufValue(GgufValueType.STRING, s);
    }

    public static GgufValue uint32(long v) {
        return new GgufValue(GgufValueType.UINT32, v);
    }

    public static GgufValue int32(long v) {
        return new GgufValue(GgufValueType.INT32, v);
    }

    public static GgufValue uint64(long v) {
        return new GgufValue(GgufValueType.UINT64, v);
    }

    public static GgufValue float32(float v) {
        return new GgufValue(GgufValueType.FLOAT32, v);
    }

    public static GgufValue bool(boolean v) {
        return new GgufValue(GgufValueType.BOOL, v);
    }

    public static GgufValue array(GgufArray array) {
        return new GgufValue(GgufValueType.ARRAY, array);
    }

    /** A short human-readable rendering (arrays abbreviated), for {@code info}. */
    public String describe() {
        return switch (type) {
            case STRING -> {
                String s = (String) value;
                yield s.length() > 80
                        ? '"' + s.substring(0, 77).replace("\n", "\\n") + "...\" (" + s.length() + " chars)"
                        : '"' + s.replace("\n", "\\n") + '"';
            }
            case ARRAY -> ((GgufArray) value).describe();
            default -> String.valueOf(value);
        };
    }

    /**
     * An array value. {@code values} is a Java array by element type: integers → {@code long[]},
     * FLOAT32 → {@code float[]}, FLOAT64 → {@code double[]}, BOOL → {@code boolean[]},
     * STRING → {@code String[]}, ARRAY → {@code GgufArray[]} (nested arrays).
     */
    public record GgufArray(GgufValueType elementType, Object values) {

        public int length() {
            return java.lang.reflect.Array.getLength(values);
        }

        public static GgufArray strings(String[] values) {
            return new GgufArray(GgufValueType.STRING, values);
        }

        public static GgufArray ints(GgufValueType integerType, long[] values) {
            return new GgufArray(integerType, values);
        }

        public static GgufArray floats(float[] values) {
            return new GgufArray(GgufValueType.FLOAT32, values);
        }

        String describe() {
            int n = length();
            StringBuilder sb = new StringBuilder("[")
                    .append(elementType.name().toLowerCase())
                    .append(" × ")
                    .append(n);
            if (n > 0 && elementType != GgufValueType.ARRAY) {
                sb.append(": ");
                for (int i = 0; i < Math.min(n, 4); i++) {
                    Object v = java.lang.reflect.Array.get(values, i);
                    sb.append(i > 0 ? ", " : "").append(v instanceof String s ? '"' + s + '"' : v);
                }
                if (n > 4) {
                    sb.append(", ...");
                }
            }
            return sb.append(']').toString();
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof GgufArray a
                    && a.elementType == elementType
                    && Arrays.deepEquals(new Object[] {values}, new Object[] {a.values});
        }

        @Override
        public int hashCode() {
            return elementType.hashCode() * 31 + Arrays.deepHashCode(new Object[] {values});
        }
    }
}
