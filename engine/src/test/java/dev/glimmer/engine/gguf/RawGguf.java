package dev.glimmer.engine.gguf;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * Builds GGUF bytes field by field, valid or not, for tests that need files the writer refuses to
 * produce (unknown types, wrong counts, bad offsets).
 */
final class RawGguf {
    private final ByteArrayOutputStream out = new ByteArrayOutputStream();

    /** Magic, version 3 and the two counts. */
    static RawGguf header(long tensorCount, long kvCount) {
        return new RawGguf().u32(GgufFile.MAGIC).u32(3).u64(tensorCount).u64(kvCount);
    }

    RawGguf u8(int v) {
        out.write(v);
        return this;
    }

    RawGguf u32(int v) {
        out.writeBytes(
                ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(v).array());
        return this;
    }

    RawGguf u64(long v) {
        out.writeBytes(
                ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(v).array());
        return this;
    }

    RawGguf str(String s) {
        byte[] b = s.getBytes(StandardCharsets.UTF_8);
        u64(b.length);
        out.writeBytes(b);
        return this;
    }

    /** A metadata entry of type uint32. */
    RawGguf kvU32(String key, int value) {
        return str(key).u32(GgufValueType.UINT32.id).u32(value);
    }

    /** A tensor info. */
    RawGguf tensor(String name, long[] shape, int ggmlType, long offset) {
        str(name).u32(shape.length);
        for (long d : shape) {
            u64(d);
        }
        return u32(ggmlType).u64(offset);
    }

    /** Zero bytes up to the next multiple of {@code alignment}, then {@code dataBytes} zero bytes of data. */
    RawGguf data(int alignment, int dataBytes) {
        while (out.size() % alignment != 0) {
            out.write(0);
        }
        out.writeBytes(new byte[dataBytes]);
        return this;
    }

    int size() {
        return out.size();
    }

    byte[] bytes() {
        return out.toByteArray();
    }
}
