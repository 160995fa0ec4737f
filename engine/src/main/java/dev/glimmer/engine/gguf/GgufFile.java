package dev.glimmer.engine.gguf;

import dev.glimmer.engine.gguf.GgufValue.GgufArray;
import dev.glimmer.engine.tensor.GgmlType;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * A GGUF file, memory-mapped. The header (metadata and tensor infos) is parsed and validated when
 * the file is opened; tensor data stays in the mapping and {@link #data(TensorInfo)} returns views
 * into it, so files of any size open in milliseconds and nothing is copied to the heap.
 *
 * <p>Every way a file can be broken (bad magic, truncation, lengths or counts beyond the file, unknown
 * types, tensors out of bounds or overlapping, dimension overflow) ends in a {@link GgufFormatException}
 * whose message names the file and the problem.
 */
public final class GgufFile implements AutoCloseable {

    /** "GGUF" read as a little-endian u32. */
    public static final int MAGIC = 0x46554747;

    public static final int DEFAULT_ALIGNMENT = 32;
    public static final String ALIGNMENT_KEY = "general.alignment";
    /** ggml's limits: at most 4 dimensions, names shorter than 64 bytes. */
    static final int MAX_DIMS = 4;

    static final int MAX_NAME_BYTES = 63;
    /** Arrays of arrays deeper than this are refused (no real file nests more than once). */
    static final int MAX_NESTING = 8;

    private static final ValueLayout.OfInt U32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong U64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort U16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfDouble F64 =
            ValueLayout.JAVA_DOUBLE_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private final Path path;
    private final Arena arena;
    private final MemorySegment mapping;
    private final int version;
    private final GgufMetadata metadata;
    private final List<TensorInfo> tensors;
    private final Map<String, TensorInfo> tensorsByName;
    private final int alignment;
    private final long dataOffset;

    private GgufFile(
            Path path,
            Arena arena,
            MemorySegment mapping,
            int version,
            GgufMetadata metadata,
            List<TensorInfo> tensors,
            int alignment,
            long dataOffset) {
        this.path = path;
        this.arena = arena;
        this.mapping = mapping;
        this.version = version;
        this.metadata = metadata;
        this.tensors = Collections.unmodifiableList(tensors);
        Map<String, TensorInfo> byName = new LinkedHashMap<>();
        tensors.forEach(t -> byName.put(t.name(), t));
        this.tensorsByName = Collections.unmodifiableMap(byName);
        this.alignment = alignment;
        this.dataOffset = dataOffset;
    }

    /**
     * Maps and parses {@code path}.
     *
     * @throws GgufFormatException when the file is not a valid GGUF v2/v3 file
     * @throws IOException         when it cannot be read
     */
    public static GgufFile open(Path path) throws IOException {
        Arena arena = Arena.ofShared();
        try {
            MemorySegment mapping;
            try (FileChannel channel = FileChannel.open(path, StandardOpenOption.READ)) {
                mapping = channel.map(FileChannel.MapMode.READ_ONLY, 0, channel.size(), arena);
            }
            return parse(path, arena, mapping);
        } catch (RuntimeException | IOException | Error e) {
            arena.close();
            throw e;
        }
    }

    private static GgufFile parse(Path path, Arena arena, MemorySegment mapping) {
        Reader r = new Reader(path, mapping);
        if (mapping.byteSize() < 4) {
            throw r.error("not a GGUF file: only " + mapping.byteSize() + " bytes");
        }
        int magic = r.u32("magic");
        if (magic != MAGIC) {
            throw r.error("not a GGUF file: bad magic " + hexMagic(magic) + " (expected \"GGUF\")");
        }
        int version = r.u32("version");
        if (version == 1) {
            throw r.error("GGUF version 1 is not supported (versions 2 and 3 are); convert the file again");
        }
        if (Integer.reverseBytes(version) == 2 || Integer.reverseBytes(version) == 3) {
            throw r.error("big-endian GGUF files are not supported");
        }
        if (version != 2 && version != 3) {
            throw r.error("unsupported GGUF version " + Integer.toUnsignedString(version) + " (versions 2 and 3 are)");
        }
        long tensorCount = r.u64("tensor count");
        long kvCount = r.u64("metadata count");
        // Each metadata entry takes at least 8 (key length) + 4 (type) + 1 bytes, each tensor info 8 + 4 + 4 + 8.
        r.checkCount("metadata count", kvCount, 13);
        r.checkCount("tensor count", tensorCount, 24);

        Map<String, GgufValue> entries = new LinkedHashMap<>();
        for (long i = 0; i < kvCount; i++) {
            String key = r.string("key of metadata entry " + i);
            String shownKey = shown(key);
            int typeId = r.u32("type of " + shownKey);
            GgufValueType type = GgufValueType.byId(typeId);
            if (type == null) {
                throw r.error(
                        "metadata key " + shownKey + " has unknown value type " + Integer.toUnsignedString(typeId));
            }
            GgufValue value = new GgufValue(type, r.value(shownKey, type, 0));
            if (entries.put(key, value) != null) {
                throw r.error("metadata key " + shownKey + " appears twice");
            }
        }
        GgufMetadata metadata = new GgufMetadata(entries);

        int alignment = DEFAULT_ALIGNMENT;
        if (metadata.has(ALIGNMENT_KEY)) {
            GgufValue a = entries.get(ALIGNMENT_KEY);
            if (a.type() != GgufValueType.UINT32) {
                throw r.error(ALIGNMENT_KEY + " should be uint32, is "
                        + a.type().name().toLowerCase());
            }
            long v = (Long) a.value();
            if (v <= 0 || Long.bitCount(v) != 1 || v > (1 << 30)) {
                throw r.error(ALIGNMENT_KEY + " must be a power of two, is " + v);
            }
            alignment = (int) v;
        }

        // The count is bounded by the file size, not by int: size the list by what real files hold.
        List<TensorInfo> tensors = new ArrayList<>((int) Math.min(tensorCount, 4096));
        Map<String, Boolean> seen = new LinkedHashMap<>();
        for (long i = 0; i < tensorCount; i++) {
            String name = r.string("name of tensor " + i);
            String shownName = shown(name);
            if (name.getBytes(StandardCharsets.UTF_8).length > MAX_NAME_BYTES) {
                throw r.error("tensor name is longer than " + MAX_NAME_BYTES + " bytes: " + shownName);
            }
            if (seen.put(name, Boolean.TRUE) != null) {
                throw r.error("tensor " + shownName + " appears twice");
            }
            int dims = r.u32("dimension count of tensor " + shownName);
            if (dims < 0 || dims > MAX_DIMS) {
                throw r.error("tensor " + shownName + " has " + Integer.toUnsignedString(dims) + " dimensions (at most "
                        + MAX_DIMS + ")");
            }
            long[] shape = new long[dims];
            long elements = 1;
            for (int d = 0; d < dims; d++) {
                shape[d] = r.u64("dimension " + d + " of tensor " + shownName);
                if (shape[d] < 0) {
                    throw r.error("tensor " + shownName + " has a negative dimension " + d + ": "
                            + Long.toUnsignedString(shape[d]));
                }
                try {
                    elements = Math.multiplyExact(elements, shape[d]);
                } catch (ArithmeticException e) {
                    throw r.error("tensor " + shownName + " dimensions " + java.util.Arrays.toString(shape)
                            + " overflow 64-bit element count");
                }
            }
            int typeId = r.u32("type of tensor " + shownName);
            GgmlType type = GgmlType.byId(typeId);
            if (type == null) {
                throw r.error("tensor " + shownName + " has unknown ggml type id " + Integer.toUnsignedString(typeId));
            }
            long offset = r.u64("offset of tensor " + shownName);
            long ne0 = dims == 0 ? 1 : shape[0];
            if (ne0 % type.blockSize != 0) {
                throw r.error("tensor " + shownName + " of type " + type.ggmlName() + " has rows of " + ne0
                        + " elements, not a multiple of its block size " + type.blockSize);
            }
            long size;
            try {
                size = Math.multiplyExact(elements / type.blockSize, (long) type.bytesPerBlock);
            } catch (ArithmeticException e) {
                throw r.error("tensor " + shownName + " is too large: " + java.util.Arrays.toString(shape));
            }
            if (offset < 0 || offset % alignment != 0) {
                throw r.error("tensor " + shownName + " offset " + Long.toUnsignedString(offset)
                        + " is not a multiple of the alignment " + alignment);
            }
            tensors.add(new TensorInfo(name, shape, type, offset, size));
        }

        long headerEnd = r.position();
        long dataOffset = align(headerEnd, alignment);
        long fileSize = mapping.byteSize();
        if (tensorCount > 0 && dataOffset > fileSize) {
            throw r.error(
                    "truncated: the header ends at byte " + headerEnd + " but the file has " + fileSize + " bytes");
        }
        long dataSize = Math.max(0, fileSize - dataOffset);
        List<TensorInfo> byOffset = new ArrayList<>(tensors);
        byOffset.sort(Comparator.comparingLong(TensorInfo::offset));
        TensorInfo previous = null;
        for (TensorInfo t : byOffset) {
            if (t.offset() > dataSize || t.size() > dataSize - t.offset()) {
                throw r.error("truncated: tensor " + shown(t.name()) + " needs bytes " + t.offset() + ".."
                        + (t.offset() + t.size()) + " of the data section, which has " + dataSize + " bytes");
            }
            if (previous != null && t.size() > 0 && previous.offset() + previous.size() > t.offset()) {
                throw r.error("tensors " + shown(previous.name()) + " and " + shown(t.name()) + " overlap");
            }
            if (t.size() > 0) {
                previous = t;
            }
        }
        return new GgufFile(path, arena, mapping, version, metadata, tensors, alignment, dataOffset);
    }

    public Path path() {
        return path;
    }

    public int version() {
        return version;
    }

    public long fileSize() {
        return mapping.byteSize();
    }

    public int alignment() {
        return alignment;
    }

    /** Absolute file offset of the data section. */
    public long dataOffset() {
        return dataOffset;
    }

    public GgufMetadata metadata() {
        return metadata;
    }

    /** Tensor infos in file order. */
    public List<TensorInfo> tensors() {
        return tensors;
    }

    public Optional<TensorInfo> findTensor(String name) {
        return Optional.ofNullable(tensorsByName.get(name));
    }

    /** The tensor called {@code name}; a {@link GgufFormatException} naming the file when it is absent. */
    public TensorInfo tensor(String name) {
        TensorInfo t = tensorsByName.get(name);
        if (t == null) {
            throw new GgufFormatException(path.getFileName() + ": tensor " + name + " is missing");
        }
        return t;
    }

    /** The tensor's bytes: a read-only view into the mapping, valid until {@link #close()}. */
    public MemorySegment data(TensorInfo tensor) {
        return mapping.asSlice(dataOffset + tensor.offset(), tensor.size());
    }

    /** Absolute file offset of a tensor's data (for GPU buffers that map file ranges). */
    public long fileOffset(TensorInfo tensor) {
        return dataOffset + tensor.offset();
    }

    /** The whole file, mapped read-only. */
    public MemorySegment mapping() {
        return mapping;
    }

    /** Linux's madvise advice that faults a range's pages in now, readable (kernel 5.14 and later). */
    private static final int MADV_POPULATE_READ = 22;

    /**
     * Maps every page of the file into this process now ({@code madvise(MADV_POPULATE_READ)}, which
     * reads from disk what the page cache lacks), so that the first passes over the weights take no page
     * faults: on the full-size model the CPU backend's first tokens spent ~5-7 % of their time faulting
     * pages in (a fault-in of a mixture's experts happens on the token that first picks them). Done only
     * on Linux and when the file fits in the memory available now ({@code MemAvailable}), else the pages
     * come as they are read.
     *
     * @return whether the pages were populated
     */
    public boolean populate() {
        if (!System.getProperty("os.name", "")
                        .toLowerCase(java.util.Locale.ROOT)
                        .contains("linux")
                || mapping.byteSize() > availableMemory()) {
            return false;
        }
        try {
            java.lang.foreign.Linker linker = java.lang.foreign.Linker.nativeLinker();
            java.lang.invoke.MethodHandle madvise = linker.downcallHandle(
                    linker.defaultLookup().findOrThrow("madvise"),
                    java.lang.foreign.FunctionDescriptor.of(
                            ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT));
            return (int) madvise.invokeExact(mapping, mapping.byteSize(), MADV_POPULATE_READ) == 0;
        } catch (Throwable e) {
            return false;
        }
    }

    /** Linux's estimate of the memory available without swapping ({@code /proc/meminfo}), or 0 when unknown. */
    private static long availableMemory() {
        try {
            for (String line : java.nio.file.Files.readAllLines(Path.of("/proc/meminfo"))) {
                if (line.startsWith("MemAvailable:")) {
                    return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
                }
            }
        } catch (IOException | RuntimeException e) {
            // unknown: treat as too little
        }
        return 0;
    }

    /** Unmaps the file; views returned by {@link #data} become invalid. */
    @Override
    public void close() {
        arena.close();
    }

    static long align(long offset, long alignment) {
        return (offset + alignment - 1) / alignment * alignment;
    }

    private static String hexMagic(int magic) {
        StringBuilder sb = new StringBuilder("0x");
        for (int i = 0; i < 4; i++) {
            sb.append(String.format("%02x", (magic >>> (8 * i)) & 0xff));
        }
        return sb.toString();
    }

    /**
     * A key or tensor name as it may appear in a one-line message: a corrupt file can hold names of any
     * length with line breaks and control characters in them.
     */
    static String shown(String s) {
        StringBuilder sb = new StringBuilder();
        int i = 0;
        for (; i < s.length() && sb.length() < 64; i++) {
            char c = s.charAt(i);
            if (c < 0x20 || c == 0x7f || c == 0x85 || c == 0x2028 || c == 0x2029) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        return i < s.length() ? sb + "..." : sb.toString();
    }

    /** A bounds-checked cursor over the header. */
    private static final class Reader {
        private final Path path;
        private final MemorySegment segment;
        private long pos;

        Reader(Path path, MemorySegment segment) {
            this.path = path;
            this.segment = segment;
        }

        long position() {
            return pos;
        }

        GgufFormatException error(String message) {
            return new GgufFormatException(path.getFileName() + ": " + message);
        }

        private void need(long bytes, String what) {
            if (bytes < 0 || bytes > segment.byteSize() - pos) {
                throw error("truncated: " + what + " at byte " + pos + " needs " + Long.toUnsignedString(bytes)
                        + " bytes, the file has " + (segment.byteSize() - pos) + " left");
            }
        }

        /** A count of items of at least {@code minBytes} each must fit in what is left of the file. */
        void checkCount(String what, long count, long minBytes) {
            long left = segment.byteSize() - pos;
            if (count < 0 || count > left / minBytes) {
                throw error("truncated or corrupt: " + what + " " + Long.toUnsignedString(count)
                        + " does not fit in the " + left + " bytes left in the file");
            }
        }

        int u32(String what) {
            need(4, what);
            int v = segment.get(U32, pos);
            pos += 4;
            return v;
        }

        long u64(String what) {
            need(8, what);
            long v = segment.get(U64, pos);
            pos += 8;
            return v;
        }

        String string(String what) {
            long length = u64("length of " + what);
            if (length < 0 || length > segment.byteSize() - pos) {
                throw error("truncated: " + what + " has length " + Long.toUnsignedString(length) + " but the file has "
                        + (segment.byteSize() - pos) + " bytes left");
            }
            if (length > Integer.MAX_VALUE - 16) {
                throw error(what + " is too long: " + length + " bytes");
            }
            byte[] bytes = segment.asSlice(pos, length).toArray(ValueLayout.JAVA_BYTE);
            pos += length;
            return new String(bytes, StandardCharsets.UTF_8);
        }

        Object value(String key, GgufValueType type, int depth) {
            String what = "value of " + key;
            switch (type) {
                case UINT8 -> {
                    need(1, what);
                    return (long) (segment.get(ValueLayout.JAVA_BYTE, pos++) & 0xff);
                }
                case INT8 -> {
                    need(1, what);
                    return (long) segment.get(ValueLayout.JAVA_BYTE, pos++);
                }
                case UINT16 -> {
                    need(2, what);
                    long v = segment.get(U16, pos) & 0xffff;
                    pos += 2;
                    return v;
                }
                case INT16 -> {
                    need(2, what);
                    long v = segment.get(U16, pos);
                    pos += 2;
                    return v;
                }
                case UINT32 -> {
                    return Integer.toUnsignedLong(u32(what));
                }
                case INT32 -> {
                    return (long) u32(what);
                }
                case UINT64, INT64 -> {
                    return u64(what);
                }
                case FLOAT32 -> {
                    need(4, what);
                    float v = segment.get(F32, pos);
                    pos += 4;
                    return v;
                }
                case FLOAT64 -> {
                    need(8, what);
                    double v = segment.get(F64, pos);
                    pos += 8;
                    return v;
                }
                case BOOL -> {
                    need(1, what);
                    byte b = segment.get(ValueLayout.JAVA_BYTE, pos++);
                    if (b != 0 && b != 1) {
                        throw error("metadata key " + key + " has a bool value of " + (b & 0xff) + " (must be 0 or 1)");
                    }
                    return b == 1;
                }
                case STRING -> {
                    return string(what);
                }
                case ARRAY -> {
                    return array(key, depth);
                }
            }
            throw new AssertionError(type);
        }

        private GgufArray array(String key, int depth) {
            if (depth >= MAX_NESTING) {
                throw error("metadata key " + key + " nests arrays more than " + MAX_NESTING + " deep");
            }
            int elementTypeId = u32("array type of " + key);
            GgufValueType elementType = GgufValueType.byId(elementTypeId);
            if (elementType == null) {
                throw error("metadata key " + key + " is an array of unknown type "
                        + Integer.toUnsignedString(elementTypeId));
            }
            long count = u64("array length of " + key);
            checkCount("array length of " + key, count, elementType.minBytes);
            if (count > Integer.MAX_VALUE - 16) {
                throw error("metadata key " + key + " has too many elements: " + count);
            }
            int n = (int) count;
            return switch (elementType) {
                case UINT8, INT8, UINT16, INT16, UINT32, INT32, UINT64, INT64 -> {
                    long[] values = new long[n];
                    for (int i = 0; i < n; i++) {
                        values[i] = (Long) value(key, elementType, depth + 1);
                    }
                    yield new GgufArray(elementType, values);
                }
                case FLOAT32 -> {
                    float[] values = new float[n];
                    for (int i = 0; i < n; i++) {
                        values[i] = (Float) value(key, elementType, depth + 1);
                    }
                    yield new GgufArray(elementType, values);
                }
                case FLOAT64 -> {
                    double[] values = new double[n];
                    for (int i = 0; i < n; i++) {
                        values[i] = (Double) value(key, elementType, depth + 1);
                    }
                    yield new GgufArray(elementType, values);
                }
                case BOOL -> {
                    boolean[] values = new boolean[n];
                    for (int i = 0; i < n; i++) {
                        values[i] = (Boolean) value(key, elementType, depth + 1);
                    }
                    yield new GgufArray(elementType, values);
                }
                case STRING -> {
                    String[] values = new String[n];
                    for (int i = 0; i < n; i++) {
                        values[i] = string("element " + i + " of " + key);
                    }
                    yield new GgufArray(elementType, values);
                }
                case ARRAY -> {
                    GgufArray[] values = new GgufArray[n];
                    for (int i = 0; i < n; i++) {
                        values[i] = array(key, depth + 1);
                    }
                    yield new GgufArray(elementType, values);
                }
            };
        }
    }
}
