package dev.glimmer.server.inference;

import dev.glimmer.engine.gguf.GgufFile;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.FileTime;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.logging.Level;
import java.util.logging.Logger;
import java.util.zip.CRC32C;

/**
 * Where the KV rows of conversations evicted from the pool go, so that a later request (also after a restart) starting
 * with the same tokens takes them instead of computing them: host memory within {@code ramBytes} (least recently used
 * out first, to disk), then files in {@code dir} within {@code diskBytes} (least recently used out first).
 *
 * <p>An entry is a conversation's tokens and the rows of its positions as the pool exported them (opaque bytes of its
 * {@code kvLayout}). A file holds one entry and names what it belongs to: the model file's identity (a hash of its
 * header, metadata and tensor table, and its size) and the pool's layout; it ends with a CRC-32C of all that precedes
 * it. It is written to a temporary name in the same directory and renamed into place, so that a file under its final
 * name is whole (a crash or a full disk leaves at most a temporary file, removed when stale). A file that is
 * truncated, corrupt, of another model or another layout is ignored with a log line and never loaded. Several servers
 * may share the directory: each sees the files present when it starts and those it writes; one removed by another
 * meanwhile is a miss.
 *
 * <p>Not thread-safe: the session manager calls it under its lock.
 */
final class KvTiers implements AutoCloseable {
    private static final Logger LOG = Logger.getLogger(KvTiers.class.getName());
    private static final int MAGIC = 0x564b4c47; // "GLKV" little-endian
    private static final int VERSION = 1;
    private static final String SUFFIX = ".kv";
    private static final String TEMP = ".tmp";
    /** A temporary file this old is left from a writer that died, not one still writing. */
    private static final Duration STALE = Duration.ofMinutes(10);
    /** The CRC of a mapped file is taken this much at a time (a byte buffer holds less than 2 GB). */
    private static final long CRC_CHUNK = 1L << 30;

    private static final ValueLayout.OfLong LONG_LE =
            ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** A prefix found in a tier: {@code shared} prompt tokens, from an entry of {@code positions} rows. */
    record Hit(String source, int positions, int shared, Entry entry) {}

    /** One conversation kept: its tokens, and its rows in RAM or a file on disk. */
    static final class Entry {
        final int[] tokens;
        final long bytes;
        byte[] rows;
        Path file;

        Entry(int[] tokens, long bytes) {
            this.tokens = tokens;
            this.bytes = bytes;
        }
    }

    private final byte[] modelId;
    private final String layout;
    private final long bytesPerPosition;
    private final long ramBytes;
    private final Optional<Path> dir;
    private final long diskBytes;
    /** In order of use, least recent first. */
    private final LinkedHashMap<String, Entry> ram = new LinkedHashMap<>(16, 0.75f, true);

    private final LinkedHashMap<String, Entry> disk = new LinkedHashMap<>(16, 0.75f, true);
    private long ramUsed;
    private long diskUsed;

    /**
     * @param dir the disk tier's directory, made if missing; empty or {@code diskBytes} 0: no disk tier
     */
    KvTiers(byte[] modelId, String layout, long bytesPerPosition, long ramBytes, Optional<Path> dir, long diskBytes) {
        this.modelId = modelId.clone();
        this.layout = layout;
        this.bytesPerPosition = bytesPerPosition;
        this.ramBytes = ramBytes;
        this.dir = diskBytes > 0 ? dir : Optional.empty();
        this.diskBytes = diskBytes;
        this.dir.ifPresent(this::scan);
    }

    /** The identity of a model file: SHA-256 of its header, metadata and tensor table, and its size. */
    static byte[] modelId(GgufFile file) {
        MessageDigest sha = sha256();
        sha.update(file.mapping().asSlice(0, file.dataOffset()).asByteBuffer());
        sha.update(ByteBuffer.allocate(8).putLong(0, file.fileSize()));
        return sha.digest();
    }

    boolean enabled() {
        return ramBytes > 0 || dir.isPresent();
    }

    /** Keeps {@code rows} (the exported rows of {@code tokens.length} positions): in RAM, else on disk. */
    void put(int[] tokens, byte[] rows) {
        if (tokens.length == 0 || rows.length != tokens.length * bytesPerPosition) {
            return;
        }
        String key = key(tokens);
        dropPrefixesOf(tokens);
        Entry e = new Entry(tokens.clone(), rows.length);
        e.rows = rows;
        if (rows.length <= ramBytes) {
            ram.put(key, e);
            ramUsed += e.bytes;
            while (ramUsed > ramBytes) {
                Iterator<Map.Entry<String, Entry>> oldest = ram.entrySet().iterator();
                Map.Entry<String, Entry> out = oldest.next();
                oldest.remove();
                ramUsed -= out.getValue().bytes;
                toDisk(out.getKey(), out.getValue());
            }
        } else {
            toDisk(key, e);
        }
    }

    /** Moves every RAM entry to disk (at shutdown, so that a restarted server finds them). */
    void flush() {
        for (Map.Entry<String, Entry> e : ram.entrySet()) {
            toDisk(e.getKey(), e.getValue());
        }
        ram.clear();
        ramUsed = 0;
    }

    /** The entry whose tokens share the longest start with {@code prompt}, at most {@code most} of them. */
    Optional<Hit> longest(int[] prompt, int most) {
        Hit best = null;
        for (var tier : List.of(Map.entry("ram", ram), Map.entry("disk", disk))) {
            for (Entry e : tier.getValue().values()) {
                int shared = Math.min(SessionManager.commonPrefix(e.tokens, prompt), most);
                if (shared > 0 && (best == null || shared > best.shared())) {
                    best = new Hit(tier.getKey(), e.tokens.length, shared, e);
                }
            }
        }
        return Optional.ofNullable(best);
    }

    /**
     * The rows of {@code hit}'s entry, or empty when they cannot be had: a RAM entry's array, or a disk entry's file
     * mapped in {@code arena} and checked against its CRC now, in place (no copy on the heap: the rows go from the
     * page cache to the pool, a conversation of 4,096 positions of the full model in 0.2 GB).
     */
    Optional<MemorySegment> rows(Hit hit, Arena arena) {
        Entry e = hit.entry();
        String key = key(e.tokens);
        if (e.rows != null) {
            ram.get(key); // most recently used now
            return Optional.of(MemorySegment.ofArray(e.rows));
        }
        disk.get(key);
        try {
            MemorySegment rows = mappedRows(e.file, arena);
            Files.setLastModifiedTime(e.file, FileTime.from(Instant.now()));
            return Optional.of(rows);
        } catch (IOException | RuntimeException ex) {
            LOG.warning("KV cache file " + e.file.getFileName() + " ignored: " + why(ex));
            forget(key, e);
            return Optional.empty();
        }
    }

    /** A file's rows, mapped in {@code arena}, after its header ({@link #read}) and its CRC over everything are checked. */
    private MemorySegment mappedRows(Path f, Arena arena) throws IOException {
        Read header = read(f);
        try (FileChannel in = FileChannel.open(f, StandardOpenOption.READ)) {
            MemorySegment file = in.map(FileChannel.MapMode.READ_ONLY, 0, in.size(), arena);
            long body = file.byteSize() - 8;
            CRC32C crc = new CRC32C();
            for (long at = 0; at < body; at += CRC_CHUNK) {
                crc.update(file.asSlice(at, Math.min(CRC_CHUNK, body - at)).asByteBuffer());
            }
            if (file.get(LONG_LE, body) != crc.getValue()) {
                throw new IOException("checksum mismatch");
            }
            return file.asSlice(body - header.rowBytes(), header.rowBytes());
        } catch (NoSuchFileException e) {
            throw new IOException("removed meanwhile (another server sharing the directory)");
        }
    }

    int ramEntries() {
        return ram.size();
    }

    int diskEntries() {
        return disk.size();
    }

    /** Entries whose tokens {@code tokens} starts with: the new one holds all they hold. */
    private void dropPrefixesOf(int[] tokens) {
        for (var tier : List.of(ram, disk)) {
            for (Iterator<Map.Entry<String, Entry>> it = tier.entrySet().iterator(); it.hasNext(); ) {
                Map.Entry<String, Entry> m = it.next();
                Entry e = m.getValue();
                if (e.tokens.length <= tokens.length
                        && SessionManager.commonPrefix(e.tokens, tokens) == e.tokens.length) {
                    it.remove();
                    if (tier == ram) {
                        ramUsed -= e.bytes;
                    } else {
                        diskUsed -= fileBytes(e);
                        delete(e.file);
                    }
                }
            }
        }
    }

    private void toDisk(String key, Entry e) {
        long size = fileBytes(e);
        if (dir.isEmpty() || size > diskBytes) {
            return;
        }
        Path file = dir.get().resolve(key + SUFFIX);
        Path temp = dir.get().resolve(key + "." + UUID.randomUUID() + TEMP);
        while (diskUsed + size > diskBytes && !disk.isEmpty()) {
            Iterator<Map.Entry<String, Entry>> oldest = disk.entrySet().iterator();
            Entry out = oldest.next().getValue();
            oldest.remove();
            diskUsed -= fileBytes(out);
            delete(out.file);
        }
        try {
            write(temp, e.tokens, e.rows);
            try {
                Files.move(temp, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            } catch (AtomicMoveNotSupportedException ex) {
                Files.move(temp, file, StandardCopyOption.REPLACE_EXISTING);
            }
        } catch (IOException | RuntimeException ex) {
            LOG.warning("KV cache of " + e.tokens.length + " tokens not written to " + dir.get() + ": " + why(ex));
            delete(temp);
            return;
        }
        Entry onDisk = new Entry(e.tokens, e.bytes);
        onDisk.file = file;
        disk.put(key, onDisk);
        diskUsed += size;
    }

    private void forget(String key, Entry e) {
        if (disk.remove(key) != null) {
            diskUsed -= fileBytes(e);
        }
    }

    /** Indexes the directory's files of this model and layout (their tokens; rows are read when used). */
    private void scan(Path directory) {
        try {
            Files.createDirectories(directory);
        } catch (IOException e) {
            LOG.warning("no KV disk cache: " + directory + " cannot be made: " + why(e));
            return;
        }
        List<Path> files = new ArrayList<>();
        try (DirectoryStream<Path> list = Files.newDirectoryStream(directory)) {
            list.forEach(files::add);
        } catch (IOException e) {
            LOG.warning("no KV disk cache: " + directory + " cannot be listed: " + why(e));
            return;
        }
        files.sort((a, b) -> modified(a).compareTo(modified(b)));
        for (Path f : files) {
            String name = f.getFileName().toString();
            if (name.endsWith(TEMP)) {
                if (modified(f).toInstant().isBefore(Instant.now().minus(STALE))) {
                    delete(f);
                }
                continue;
            }
            if (!name.endsWith(SUFFIX)) {
                continue;
            }
            try {
                Read r = read(f);
                String key = key(r.tokens);
                if (!name.equals(key + SUFFIX)) {
                    throw new IOException("its name is not its tokens' key");
                }
                Entry e = new Entry(r.tokens, r.rowBytes);
                e.file = f;
                disk.put(key, e);
                diskUsed += fileBytes(e);
            } catch (ForeignException e) {
                LOG.info("KV cache file " + name + " ignored: " + e.getMessage());
            } catch (IOException | RuntimeException e) {
                LOG.warning("KV cache file " + name + " ignored: " + why(e));
            }
        }
        if (!disk.isEmpty()) {
            LOG.info(disk.size() + " cached conversations on disk in " + directory + " (" + (diskUsed >> 20) + " MB)");
        }
    }

    private static FileTime modified(Path f) {
        try {
            return Files.getLastModifiedTime(f);
        } catch (IOException e) {
            return FileTime.fromMillis(0);
        }
    }

    /** The length of {@code e}'s file: what it takes of the disk budget. */
    private long fileBytes(Entry e) {
        return headerBytes(e.tokens.length) + e.bytes + 8;
    }

    /** The bytes before the rows: magic, version, model id, layout, tokens, row bytes. */
    private long headerBytes(int tokens) {
        return 4 + 4 + 32 + 4 + layout.getBytes(StandardCharsets.UTF_8).length + 4 + 4L * tokens + 8;
    }

    private void write(Path temp, int[] tokens, byte[] rows) throws IOException {
        byte[] layoutBytes = layout.getBytes(StandardCharsets.UTF_8);
        ByteBuffer header =
                ByteBuffer.allocate(Math.toIntExact(headerBytes(tokens.length))).order(ByteOrder.LITTLE_ENDIAN);
        header.putInt(MAGIC)
                .putInt(VERSION)
                .put(modelId)
                .putInt(layoutBytes.length)
                .put(layoutBytes)
                .putInt(tokens.length);
        for (int t : tokens) {
            header.putInt(t);
        }
        header.putLong(rows.length).flip();
        CRC32C crc = new CRC32C();
        crc.update(header.duplicate());
        crc.update(rows);
        ByteBuffer trailer =
                ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(0, crc.getValue());
        try (FileChannel out = FileChannel.open(temp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
            for (ByteBuffer b : new ByteBuffer[] {header, ByteBuffer.wrap(rows), trailer}) {
                while (b.hasRemaining()) {
                    out.write(b);
                }
            }
            out.force(true);
        }
    }

    /** A file's header, checked: its tokens and the length of its rows ({@link #mappedRows} checks the rows). */
    private record Read(int[] tokens, long rowBytes) {}

    /** The file is whole but of another model or layout: not an error of this server's. */
    private static final class ForeignException extends IOException {
        ForeignException(String message) {
            super(message);
        }
    }

    private Read read(Path f) throws IOException {
        long size = Files.size(f);
        try (InputStream raw = Files.newInputStream(f);
                DataInputStream in = new DataInputStream(new java.io.BufferedInputStream(raw, 1 << 16))) {
            CRC32C crc = new CRC32C();
            byte[] fixed = readFully(in, 4 + 4 + 32 + 4, crc);
            ByteBuffer h = ByteBuffer.wrap(fixed).order(ByteOrder.LITTLE_ENDIAN);
            if (h.getInt() != MAGIC) {
                throw new IOException("not a Glimmer KV cache file");
            }
            int version = h.getInt();
            if (version != VERSION) {
                throw new ForeignException("format version " + version + ", not " + VERSION);
            }
            byte[] id = new byte[32];
            h.get(id);
            int layoutLength = h.getInt();
            if (layoutLength < 0 || layoutLength > 1024) {
                throw new IOException("corrupt header");
            }
            String fileLayout = new String(readFully(in, layoutLength, crc), StandardCharsets.UTF_8);
            if (!Arrays.equals(id, modelId)) {
                throw new ForeignException("made with another model file");
            }
            if (!fileLayout.equals(layout)) {
                throw new ForeignException("KV layout " + fileLayout + ", not this server's " + layout);
            }
            int n = ByteBuffer.wrap(readFully(in, 4, crc))
                    .order(ByteOrder.LITTLE_ENDIAN)
                    .getInt();
            if (n <= 0 || 4L * n > size) {
                throw new IOException("corrupt header (" + n + " tokens)");
            }
            ByteBuffer t = ByteBuffer.wrap(readFully(in, 4 * n, crc)).order(ByteOrder.LITTLE_ENDIAN);
            int[] tokens = new int[n];
            for (int i = 0; i < n; i++) {
                tokens[i] = t.getInt();
            }
            long rowBytes = ByteBuffer.wrap(readFully(in, 8, crc))
                    .order(ByteOrder.LITTLE_ENDIAN)
                    .getLong();
            if (rowBytes != n * bytesPerPosition || size != headerBytes(n) + rowBytes + 8) {
                throw new IOException("truncated or corrupt: " + size + " bytes for " + n + " positions");
            }
            return new Read(tokens, rowBytes);
        } catch (NoSuchFileException e) {
            throw new IOException("removed meanwhile (another server sharing the directory)");
        }
    }

    private static byte[] readFully(DataInputStream in, int n, CRC32C crc) throws IOException {
        byte[] b = new byte[n];
        in.readFully(b);
        crc.update(b);
        return b;
    }

    private String key(int[] tokens) {
        MessageDigest sha = sha256();
        sha.update(modelId);
        sha.update(layout.getBytes(StandardCharsets.UTF_8));
        ByteBuffer b = ByteBuffer.allocate(4 * tokens.length).order(ByteOrder.LITTLE_ENDIAN);
        b.asIntBuffer().put(tokens);
        sha.update(b);
        return HexFormat.of().formatHex(sha.digest(), 0, 20);
    }

    private static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    private static void delete(Path f) {
        if (f == null) {
            return;
        }
        try {
            Files.deleteIfExists(f);
        } catch (IOException e) {
            LOG.log(Level.FINE, "could not delete " + f, e);
        }
    }

    private static String why(Exception e) {
        return e instanceof java.io.EOFException ? "truncated" : String.valueOf(e.getMessage());
    }

    @Override
    public void close() {
        flush();
    }
}
