package dev.glimmer.engine.gguf;

/** The metadata value types of GGUF, with their type ids. */
public enum GgufValueType {
    UINT8(0, 1),
    INT8(1, 1),
    UINT16(2, 2),
    INT16(3, 2),
    UINT32(4, 4),
    INT32(5, 4),
    FLOAT32(6, 4),
    BOOL(7, 1),
    STRING(8, 8),
    ARRAY(9, 12),
    UINT64(10, 8),
    INT64(11, 8),
    FLOAT64(12, 8);

    public final int id;
    /** The fewest bytes a value of this type takes in a file (a string's or array's header alone). */
    final int minBytes;

    GgufValueType(int id, int minBytes) {
        this.id = id;
        this.minBytes = minBytes;
    }

    /** The type with this id, or null. */
    public static GgufValueType byId(int id) {
        for (GgufValueType t : values()) {
            if (t.id == id) {
                return t;
            }
        }
        return null;
    }

    /** True for the integer types (signed and unsigned). */
    public boolean integer() {
        return switch (this) {
            case UINT8, INT8, UINT16, INT16, UINT32, INT32, UINT64, INT64 -> true;
            default -> false;
        };
    }
}
