package dev.glimmer.kernels;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A kernel argument struct as declared in a .metal file ({@code struct MatVecArgs { uint rows; float eps; };}):
 * only 4-byte scalars ({@code uint}, {@code int}, {@code float}), so its layout is the field order
 * with no padding on every compiler, and the host packs it by field name.
 */
public record ArgStruct(String name, List<Field> fields) {

    /** One field: its scalar type and name. */
    public record Field(String type, String name) {
        public Field {
            if (!type.equals("uint") && !type.equals("int") && !type.equals("float")) {
                throw new IllegalArgumentException("argument struct field " + name + " has type " + type
                        + "; only uint, int and float are allowed");
            }
        }
    }

    public ArgStruct {
        fields = List.copyOf(fields);
    }

    /** Bytes of the struct. */
    public int size() {
        return fields.size() * 4;
    }

    /** Where field {@code field} lies in the struct, in bytes. */
    public int offset(String field) {
        for (int i = 0; i < fields.size(); i++) {
            if (fields.get(i).name().equals(field)) {
                return 4 * i;
            }
        }
        throw new IllegalArgumentException(name + " has no field " + field);
    }

    /** The struct's bytes (little-endian) with every field set from {@code values}, which must name each field exactly once. */
    public byte[] pack(Map<String, ? extends Number> values) {
        Set<String> unknown = new HashSet<>(values.keySet());
        ByteBuffer b = ByteBuffer.allocate(size()).order(ByteOrder.LITTLE_ENDIAN);
        for (Field f : fields) {
            Number v = values.get(f.name());
            if (v == null) {
                throw new IllegalArgumentException(name + "." + f.name() + " is not set");
            }
            unknown.remove(f.name());
            switch (f.type()) {
                case "float" -> b.putFloat(v.floatValue());
                case "uint" -> {
                    long l = v.longValue();
                    if (l < 0 || l > 0xFFFF_FFFFL) {
                        throw new IllegalArgumentException(name + "." + f.name() + " = " + l + " does not fit a uint");
                    }
                    b.putInt((int) l);
                }
                default -> b.putInt(Math.toIntExact(v.longValue()));
            }
        }
        if (!unknown.isEmpty()) {
            throw new IllegalArgumentException(name + " has no field(s) " + unknown);
        }
        return b.array();
    }
}
