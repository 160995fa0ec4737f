package dev.glimmer.engine.gguf;

import dev.glimmer.engine.gguf.GgufValue.GgufArray;
import dev.glimmer.engine.tensor.GgmlType;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Writes a GGUF v3 file as a stream: {@link #create} writes the header (metadata and tensor infos)
 * at once, then the caller hands over each tensor's bytes in file order through {@link #write},
 * in pieces of any size, so a file of any size is written with a bounded amount of memory.
 *
 * <p>The file is written under a temporary name next to the target ({@code NAME.partial}) and renamed
 * to its final name only by a {@link #close()} that follows complete data; an interrupted or failed
 * write never leaves a half file under the final name.
 *
 * <p>Tensors are laid out in the given order, each at an offset aligned to {@code general.alignment}
 * (a uint32 power of two when present in the metadata, else 32), with zero padding between them.
 */
public final class GgufWriter implements AutoCloseable {

    public static final int VERSION = 3;
    private static final int BUFFER_BYTES = 8 << 20;

    /**
     * A tensor to be written.
     *
     * @param name  at most 63 bytes of UTF-8
     * @param shape ggml dimensions, ne0 (the contiguous row) first; ne0 a multiple of the type's block size
     * @param type  the element type
     */
    public record TensorSpec(String name, long[] shape, GgmlType type) {

        /** Bytes of this tensor's data. */
        public long size() {
            long elements = 1;
            for (long d : shape) {
                elements = Math.multiplyExact(elements, d);
            }
            return Math.multiplyExact(elements / type.blockSize, (long) type.bytesPerBlock);
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof TensorSpec t && t.name.equals(name) && Arrays.equals(t.shape, shape) && t.type == type;
        }

        @Override
        public int hashCode() {
            return name.hashCode() * 31 + Arrays.hashCode(shape);
        }

        @Override
        public String toString() {
            return name + " " + type.ggmlName() + " " + Arrays.toString(shape);
        }
    }

    private final Path target;
    private final Path partial;
    private final FileChannel channel;
    private final List<TensorSpec> tensors;
    private final int alignment;
    private final long totalBytes;
    private final ByteBuffer buffer = ByteBuffer.allocateDirect(BUFFER_BYTES);
    /** Index of the tensor whose data comes next, and how many of its bytes have arrived. */
    private int current;

    private long currentWritten;
    private long written;
    private boolean closed;

    private GgufWriter(
            Path target, Path partial, FileChannel channel, List<TensorSpec> tensors, int alignment, long totalBytes) {
        this.target = target;
        this.partial = partial;
        this.channel = channel;
        this.tensors = tensors;
        this.alignment = alignment;
        this.totalBytes = totalBytes;
    }

    /**
     * Checks the header, writes it to {@code path}'s temporary name and returns a writer that expects
     * the tensors' data next, in the order of {@code tensors}.
     *
     * @param metadata the key/value pairs in the order they are to appear in the file
     * @throws IllegalArgumentException when the metadata or a tensor cannot be written as valid GGUF
     */
    public static GgufWriter create(Path path, Map<String, GgufValue> metadata, List<TensorSpec> tensors)
            throws IOException {
        int alignment = alignmentOf(metadata);
        byte[] header = header(metadata, tensors, alignment);
        long total = fileSize(header.length, tensors, alignment);
        Path partial = partialPath(path);
        FileChannel channel = FileChannel.open(
                partial, StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING);
        GgufWriter writer = new GgufWriter(path, partial, channel, List.copyOf(tensors), alignment, total);
        try {
            writer.put(ByteBuffer.wrap(header));
            writer.padToAlignment();
            writer.skipEmptyTensors();
        } catch (IOException | RuntimeException e) {
            writer.abandon();
            throw e;
        }
        return writer;
    }

    /** The temporary name a file is written under until it is complete: {@code NAME.partial} beside it. */
    public static Path partialPath(Path path) {
        return path.resolveSibling(path.getFileName() + ".partial");
    }

    /** The size a file with this header will have, computed without writing anything. */
    public static long fileSize(Map<String, GgufValue> metadata, List<TensorSpec> tensors) {
        int alignment = alignmentOf(metadata);
        return fileSize(header(metadata, tensors, alignment).length, tensors, alignment);
    }

    private static long fileSize(long headerBytes, List<TensorSpec> tensors, int alignment) {
        long total = headerBytes;
        for (TensorSpec t : tensors) {
            total = GgufFile.align(total, alignment) + t.size();
        }
        return total;
    }

    /** The size the finished file will have. */
    public long totalBytes() {
        return totalBytes;
    }

    /** Bytes written so far (header, padding and data). */
    public long bytesWritten() {
        return written;
    }

    public int alignment() {
        return alignment;
    }

    /** The tensor whose data {@link #write} expects next; null when all data has been written. */
    public TensorSpec currentTensor() {
        return current < tensors.size() ? tensors.get(current) : null;
    }

    /**
     * Appends the bytes from {@code data}'s position to its limit to the current tensor's data. A piece
     * must not reach past the end of the current tensor; the next tensor begins after that.
     */
    public void write(ByteBuffer data) throws IOException {
        TensorSpec t = currentTensor();
        if (t == null) {
            throw new IllegalStateException("all tensor data has been written already");
        }
        long left = t.size() - currentWritten;
        if (data.remaining() > left) {
            throw new IllegalArgumentException(
                    "tensor " + t.name() + " has " + left + " bytes left to write, got " + data.remaining());
        }
        currentWritten += data.remaining();
        put(data);
        if (currentWritten == t.size()) {
            current++;
            currentWritten = 0;
            if (current < tensors.size()) {
                padToAlignment();
            }
            skipEmptyTensors();
        }
    }

    /**
     * Finishes the file and gives it its final name. When not all tensor data was written, the
     * temporary file is deleted and an {@link IllegalStateException} says which tensor was incomplete.
     */
    @Override
    public void close() throws IOException {
        if (closed) {
            return;
        }
        TensorSpec missing = currentTensor();
        if (missing != null) {
            abandon();
            throw new IllegalStateException("GGUF file " + target.getFileName() + " was not finished: tensor "
                    + missing.name() + " got " + currentWritten + " of " + missing.size() + " bytes");
        }
        try {
            flush();
            channel.force(false);
            channel.close();
            closed = true;
            Files.move(partial, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException | RuntimeException e) {
            abandon();
            throw e;
        }
    }

    /** Closes and deletes the temporary file (the final name is never touched). */
    private void abandon() throws IOException {
        closed = true;
        try {
            channel.close();
        } finally {
            Files.deleteIfExists(partial);
        }
    }

    private void skipEmptyTensors() {
        while (current < tensors.size() && tensors.get(current).size() == 0) {
            current++;
        }
    }

    private void padToAlignment() throws IOException {
        int padding = (int) (GgufFile.align(written, alignment) - written);
        if (padding > 0) {
            put(ByteBuffer.allocate(padding));
        }
    }

    private void put(ByteBuffer data) throws IOException {
        written += data.remaining();
        while (data.hasRemaining()) {
            if (!buffer.hasRemaining()) {
                flush();
            }
            int n = Math.min(buffer.remaining(), data.remaining());
            ByteBuffer piece = data.slice(data.position(), n);
            buffer.put(piece);
            data.position(data.position() + n);
        }
    }

    private void flush() throws IOException {
        buffer.flip();
        while (buffer.hasRemaining()) {
            channel.write(buffer);
        }
        buffer.clear();
    }

    private static int alignmentOf(Map<String, GgufValue> metadata) {
        GgufValue a = metadata.get(GgufFile.ALIGNMENT_KEY);
        if (a == null) {
            return GgufFile.DEFAULT_ALIGNMENT;
        }
        if (a.type() != GgufValueType.UINT32 || !(a.value() instanceof Long v)) {
            throw new IllegalArgumentException(GgufFile.ALIGNMENT_KEY + " must be a uint32, is " + a.type());
        }
        if (v <= 0 || Long.bitCount(v) != 1 || v > (1 << 30)) {
            throw new IllegalArgumentException(GgufFile.ALIGNMENT_KEY + " must be a power of two, is " + v);
        }
        return (int) (long) v;
    }

    /** Magic, version, counts, metadata and tensor infos (offsets aligned, in the given order). */
    private static byte[] header(Map<String, GgufValue> metadata, List<TensorSpec> tensors, int alignment) {
        Bytes out = new Bytes();
        out.u32(GgufFile.MAGIC);
        out.u32(VERSION);
        out.u64(tensors.size());
        out.u64(metadata.size());
        for (Map.Entry<String, GgufValue> e : metadata.entrySet()) {
            String key = e.getKey();
            GgufValue value = e.getValue();
            out.string(key);
            out.u32(value.type().id);
            writeValue(out, key, value.type(), value.value(), 0);
        }
        Set<String> names = new HashSet<>();
        long offset = 0;
        for (TensorSpec t : tensors) {
            checkTensor(t);
            if (!names.add(t.name())) {
                throw new IllegalArgumentException("tensor " + t.name() + " is given twice");
            }
            out.string(t.name());
            out.u32(t.shape().length);
            for (long d : t.shape()) {
                out.u64(d);
            }
            out.u32(t.type().id);
            offset = GgufFile.align(offset, alignment);
            out.u64(offset);
            offset += t.size();
        }
        return out.toByteArray();
    }

    private static void checkTensor(TensorSpec t) {
        if (t.name().getBytes(StandardCharsets.UTF_8).length > GgufFile.MAX_NAME_BYTES) {
            throw new IllegalArgumentException(
                    "tensor name longer than " + GgufFile.MAX_NAME_BYTES + " bytes: " + t.name());
        }
        if (t.shape().length > GgufFile.MAX_DIMS) {
            throw new IllegalArgumentException(
                    "tensor " + t.name() + " has more than " + GgufFile.MAX_DIMS + " dimensions");
        }
        for (long d : t.shape()) {
            if (d < 0) {
                throw new IllegalArgumentException("tensor " + t.name() + " has a negative dimension");
            }
        }
        long ne0 = t.shape().length == 0 ? 1 : t.shape()[0];
        if (ne0 % t.type().blockSize != 0) {
            throw new IllegalArgumentException("tensor " + t.name() + ": rows of " + ne0
                    + " elements are not a multiple of " + t.type().ggmlName() + "'s block size " + t.type().blockSize);
        }
    }

    private static void writeValue(Bytes out, String key, GgufValueType type, Object value, int depth) {
        switch (type) {
            case UINT8 -> out.u8((int) integer(key, type, value, 0, 0xff));
            case INT8 -> out.u8((int) integer(key, type, value, Byte.MIN_VALUE, Byte.MAX_VALUE));
            case UINT16 -> out.u16((int) integer(key, type, value, 0, 0xffff));
            case INT16 -> out.u16((int) integer(key, type, value, Short.MIN_VALUE, Short.MAX_VALUE));
            case UINT32 -> out.u32((int) integer(key, type, value, 0, 0xffff_ffffL));
            case INT32 -> out.u32((int) integer(key, type, value, Integer.MIN_VALUE, Integer.MAX_VALUE));
            case UINT64, INT64 -> out.u64(integer(key, type, value, Long.MIN_VALUE, Long.MAX_VALUE));
            case FLOAT32 -> out.u32(Float.floatToRawIntBits(cast(key, type, value, Float.class)));
            case FLOAT64 -> out.u64(Double.doubleToRawLongBits(cast(key, type, value, Double.class)));
            case BOOL -> out.u8(cast(key, type, value, Boolean.class) ? 1 : 0);
            case STRING -> out.string(cast(key, type, value, String.class));
            case ARRAY -> writeArray(out, key, cast(key, type, value, GgufArray.class), depth);
        }
    }

    private static void writeArray(Bytes out, String key, GgufArray array, int depth) {
        if (depth >= GgufFile.MAX_NESTING) {
            throw new IllegalArgumentException(
                    "metadata key " + key + " nests arrays more than " + GgufFile.MAX_NESTING + " deep");
        }
        GgufValueType elementType = array.elementType();
        out.u32(elementType.id);
        int n = array.length();
        out.u64(n);
        Object values = array.values();
        for (int i = 0; i < n; i++) {
            Object element = switch (values) {
                case long[] a -> a[i];
                case float[] a -> a[i];
                case double[] a -> a[i];
                case boolean[] a -> a[i];
                case Object[] a -> a[i];
                default ->
                    throw new IllegalArgumentException("metadata key " + key + ": unsupported array "
                            + values.getClass().getSimpleName());
            };
            writeValue(out, key, elementType, element, depth + 1);
        }
    }

    private static long integer(String key, GgufValueType type, Object value, long min, long max) {
        long v = cast(key, type, value, Long.class);
        if (v < min || v > max) {
            throw new IllegalArgumentException("metadata key " + key + ": " + v + " does not fit "
                    + type.name().toLowerCase());
        }
        return v;
    }

    private static <T> T cast(String key, GgufValueType type, Object value, Class<T> cls) {
        if (!cls.isInstance(value)) {
            throw new IllegalArgumentException("metadata key " + key + " of type "
                    + type.name().toLowerCase()
                    + " holds a " + (value == null ? "null" : value.getClass().getSimpleName()) + ", expected "
                    + cls.getSimpleName());
        }
        return cls.cast(value);
    }

    /** A growing little-endian byte buffer for the header. */
    private static final class Bytes extends ByteArrayOutputStream {
        private final ByteBuffer scratch = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);

        void u8(int v) {
            write(v);
        }

        void u16(int v) {
            scratch.clear();
            write(scratch.putShort((short) v).array(), 0, 2);
        }

        void u32(int v) {
            scratch.clear();
            write(scratch.putInt(v).array(), 0, 4);
        }

        void u64(long v) {
            scratch.clear();
            write(scratch.putLong(v).array(), 0, 8);
        }

        void string(String s) {
            byte[] b = s.getBytes(StandardCharsets.UTF_8);
            u64(b.length);
            write(b, 0, b.length);
        }
    }
}
