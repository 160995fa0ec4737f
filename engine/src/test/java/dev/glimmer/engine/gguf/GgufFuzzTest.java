package dev.glimmer.engine.gguf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.InvalidInputException;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Mutates the headers of the oracle GGUF files thousands of times (fixed seed) and opens each
 * result: every case must either open, with every tensor's view inside the file, or fail with a
 * clean {@link GgufFormatException}/{@link InvalidInputException}; never another exception or a hang.
 */
class GgufFuzzTest {

    private static final long SEED = 20261121L;
    private static final int CASES_PER_FILE = 1000;
    private static final String[] SOURCES = {"tiny-q4_0.gguf", "tiny-q8_0.gguf", "tiny-f32.gguf", "small-q4_k_m.gguf"};

    @TempDir
    Path dir;

    /** What a header field is, for targeted mutations. */
    enum Kind {
        COUNT,
        LENGTH,
        VALUE_TYPE,
        DIMS,
        DIM,
        GGML_TYPE,
        OFFSET
    }

    record Field(Kind kind, int position, int bytes) {}

    record Outcome(int opened, int refused) {}

    @Test
    void mutatedHeadersOpenOrFailCleanly() {
        Outcome total = assertTimeoutPreemptively(Duration.ofSeconds(50), () -> {
            Random random = new Random(SEED);
            // Besides the oracle files, one with every value type and nested arrays, which they lack.
            Path everyType = dir.resolve("every-type.gguf");
            GgufWriterTest.writeRandom(everyType, GgufWriterTest.everyValueType(), GgufWriterTest.someTensors(), 1);
            List<Path> sources = new ArrayList<>();
            for (String source : SOURCES) {
                sources.add(GgufFileTest.oracle(source));
            }
            sources.add(everyType);
            int opened = 0;
            int refused = 0;
            for (Path source : sources) {
                Outcome o = fuzz(source, random);
                opened += o.opened();
                refused += o.refused();
            }
            return new Outcome(opened, refused);
        });
        assertEquals((SOURCES.length + 1) * CASES_PER_FILE, total.opened() + total.refused());
        // Both outcomes must occur, or the mutations are not exercising the reader.
        assertTrue(total.refused() > 1000, "refused " + total.refused());
        assertTrue(total.opened() > 100, "opened " + total.opened());
    }

    private Outcome fuzz(Path source, Random random) throws IOException {
        byte[] original = Files.readAllBytes(source);
        List<Field> fields = scanHeader(original);
        int headerEnd = fields.getLast().position() + fields.getLast().bytes();
        byte[] header = java.util.Arrays.copyOf(original, headerEnd);
        Path mutated = dir.resolve("mutated.gguf");
        Path truncated = dir.resolve("truncated.gguf");
        Files.write(mutated, original);
        int opened = 0;
        int refused = 0;
        for (int i = 0; i < CASES_PER_FILE; i++) {
            int kind = random.nextInt(8);
            Path target = mutated;
            String description;
            if (kind == 0) {
                // Truncation: mostly inside the header, sometimes inside the data.
                int cut = random.nextInt(4) == 0 ? random.nextInt(original.length) : random.nextInt(headerEnd + 64);
                Files.write(truncated, java.util.Arrays.copyOf(original, Math.min(cut, original.length)));
                target = truncated;
                description = "truncated at " + cut;
            } else {
                byte[] h = header.clone();
                description = mutate(h, fields, kind, random);
                writeHeader(mutated, h);
            }
            try {
                if (openAndTouchEverything(target)) {
                    opened++;
                } else {
                    refused++;
                }
            } catch (Throwable t) {
                throw new AssertionError(source.getFileName() + " case " + i + " (" + description + "): " + t, t);
            } finally {
                if (target == mutated) {
                    writeHeader(mutated, header);
                }
            }
        }
        return new Outcome(opened, refused);
    }

    /** True when the file opened; false when it was refused cleanly; anything else propagates. */
    private static boolean openAndTouchEverything(Path file) throws IOException {
        try (GgufFile f = GgufFile.open(file)) {
            f.metadata().entries().values().forEach(GgufValue::describe);
            for (TensorInfo t : f.tensors()) {
                MemorySegment data = f.data(t);
                if (data.byteSize() != t.size() || f.fileOffset(t) + t.size() > f.fileSize()) {
                    throw new AssertionError("tensor " + t.name() + " lies outside the file");
                }
                if (t.size() > 0) {
                    data.get(ValueLayout.JAVA_BYTE, 0);
                    data.get(ValueLayout.JAVA_BYTE, t.size() - 1);
                }
            }
            return true;
        } catch (InvalidInputException e) { // GgufFormatException included
            if (e.getMessage() == null
                    || e.getMessage().isBlank()
                    || e.getMessage().lines().count() != 1) {
                throw new AssertionError("message should be one line: " + e.getMessage());
            }
            return false;
        }
    }

    private static String mutate(byte[] h, List<Field> fields, int kind, Random random) {
        ByteBuffer b = ByteBuffer.wrap(h).order(ByteOrder.LITTLE_ENDIAN);
        switch (kind) {
            case 1 -> {
                int flips = 1 + random.nextInt(8);
                for (int i = 0; i < flips; i++) {
                    int at = random.nextInt(h.length);
                    h[at] ^= (byte) (1 << random.nextInt(8));
                }
                return flips + " bit flips";
            }
            case 2 -> {
                int at = random.nextInt(h.length);
                h[at] = (byte) random.nextInt(256);
                return "byte " + at + " set";
            }
            case 3 -> {
                Field f = pick(fields, random, Kind.COUNT, Kind.LENGTH);
                long[] values = {
                    -1,
                    Long.MIN_VALUE,
                    Long.MAX_VALUE,
                    1L << 32,
                    1L << 62,
                    h.length,
                    h.length + 1L,
                    random.nextLong(),
                    random.nextInt(1 << 20),
                    0
                };
                long v = values[random.nextInt(values.length)];
                b.putLong(f.position(), v);
                return f + " set to " + v;
            }
            case 4 -> {
                Field f = pick(fields, random, Kind.VALUE_TYPE, Kind.GGML_TYPE);
                int[] values = {13, 99, -1, 4, 5, 31, 40, 63, 64, random.nextInt(), random.nextInt(16)};
                int v = values[random.nextInt(values.length)];
                b.putInt(f.position(), v);
                return f + " set to " + v;
            }
            case 5 -> {
                Field f = pick(fields, random, Kind.DIMS, Kind.DIM);
                if (f.kind() == Kind.DIMS) {
                    int v = random.nextBoolean() ? random.nextInt(8) : random.nextInt();
                    b.putInt(f.position(), v);
                    return f + " set to " + v;
                }
                long[] values = {0, 1, 31, 33, -1, 1L << 32, 1L << 40, Long.MAX_VALUE, random.nextLong()};
                long v = values[random.nextInt(values.length)];
                b.putLong(f.position(), v);
                return f + " set to " + v;
            }
            case 6 -> {
                Field f = pick(fields, random, Kind.OFFSET);
                long[] values = {
                    0,
                    16,
                    32,
                    -32,
                    1L << 40,
                    Long.MAX_VALUE,
                    b.getLong(f.position()) + 32,
                    b.getLong(f.position()) - 32,
                    random.nextLong()
                };
                long v = values[random.nextInt(values.length)];
                b.putLong(f.position(), v);
                return f + " set to " + v;
            }
            default -> {
                // Several random field mutations at once.
                for (int i = 0; i < 3; i++) {
                    Field f = fields.get(random.nextInt(fields.size()));
                    for (int j = 0; j < f.bytes(); j++) {
                        h[f.position() + j] = (byte) random.nextInt(256);
                    }
                }
                return "three random fields";
            }
        }
    }

    private static Field pick(List<Field> fields, Random random, Kind... kinds) {
        List<Field> matching =
                fields.stream().filter(f -> List.of(kinds).contains(f.kind())).toList();
        return matching.get(random.nextInt(matching.size()));
    }

    private static void writeHeader(Path file, byte[] header) throws IOException {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.WRITE)) {
            ByteBuffer b = ByteBuffer.wrap(header);
            while (b.hasRemaining()) {
                ch.write(b, b.position());
            }
        }
    }

    /**
     * The positions of the count, length, type, dimension and offset fields of a valid header, in
     * file order; the last field ends where the header does.
     */
    static List<Field> scanHeader(byte[] file) {
        ByteBuffer b = ByteBuffer.wrap(file).order(ByteOrder.LITTLE_ENDIAN);
        List<Field> fields = new ArrayList<>();
        b.position(8);
        fields.add(new Field(Kind.COUNT, b.position(), 8));
        long tensors = b.getLong();
        fields.add(new Field(Kind.COUNT, b.position(), 8));
        long kvs = b.getLong();
        for (long i = 0; i < kvs; i++) {
            skipString(b, fields);
            fields.add(new Field(Kind.VALUE_TYPE, b.position(), 4));
            skipValue(b, b.getInt(), fields);
        }
        for (long i = 0; i < tensors; i++) {
            skipString(b, fields);
            fields.add(new Field(Kind.DIMS, b.position(), 4));
            int dims = b.getInt();
            for (int d = 0; d < dims; d++) {
                fields.add(new Field(Kind.DIM, b.position(), 8));
                b.getLong();
            }
            fields.add(new Field(Kind.GGML_TYPE, b.position(), 4));
            b.getInt();
            fields.add(new Field(Kind.OFFSET, b.position(), 8));
            b.getLong();
        }
        return fields;
    }

    private static void skipString(ByteBuffer b, List<Field> fields) {
        fields.add(new Field(Kind.LENGTH, b.position(), 8));
        long n = b.getLong();
        b.position(b.position() + (int) n);
    }

    private static void skipValue(ByteBuffer b, int type, List<Field> fields) {
        GgufValueType t = GgufValueType.byId(type);
        switch (t) {
            case STRING -> skipString(b, fields);
            case ARRAY -> {
                fields.add(new Field(Kind.VALUE_TYPE, b.position(), 4));
                int elementType = b.getInt();
                fields.add(new Field(Kind.LENGTH, b.position(), 8));
                long n = b.getLong();
                if (elementType == GgufValueType.STRING.id || elementType == GgufValueType.ARRAY.id) {
                    // Record the fields of the first few elements only: enough targets, a short list.
                    for (long i = 0; i < n; i++) {
                        List<Field> sink = i < 8 ? fields : new ArrayList<>();
                        skipValue(b, elementType, sink);
                    }
                } else {
                    b.position(b.position() + (int) (n * GgufValueType.byId(elementType).minBytes));
                }
            }
            default -> b.position(b.position() + t.minBytes);
        }
    }
}
