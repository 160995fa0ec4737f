package dev.glimmer.engine.gguf;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.gguf.GgufValue.GgufArray;
import dev.glimmer.engine.gguf.GgufWriter.TensorSpec;
import dev.glimmer.engine.tensor.GgmlType;
import java.io.IOException;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class GgufWriterTest {

    @TempDir
    Path dir;

    /** One entry of every value type, arrays of every element type, and arrays nested two deep. */
    static Map<String, GgufValue> everyValueType() {
        Map<String, GgufValue> m = new LinkedHashMap<>();
        m.put("general.architecture", GgufValue.of("deepseek2"));
        m.put("t.uint8", new GgufValue(GgufValueType.UINT8, 255L));
        m.put("t.int8", new GgufValue(GgufValueType.INT8, -128L));
        m.put("t.uint16", new GgufValue(GgufValueType.UINT16, 65535L));
        m.put("t.int16", new GgufValue(GgufValueType.INT16, -32768L));
        m.put("t.uint32", GgufValue.uint32(4294967295L));
        m.put("t.int32", GgufValue.int32(Integer.MIN_VALUE));
        m.put("t.float32", GgufValue.float32(1e-5f));
        m.put("t.bool", GgufValue.bool(true));
        m.put("t.string", GgufValue.of("héllo\nwörld ✓"));
        m.put("t.uint64", GgufValue.uint64(-1L));
        m.put("t.int64", new GgufValue(GgufValueType.INT64, Long.MIN_VALUE));
        m.put("t.float64", new GgufValue(GgufValueType.FLOAT64, Math.PI));
        m.put("t.empty_string", GgufValue.of(""));
        m.put("a.uint8", GgufValue.array(GgufArray.ints(GgufValueType.UINT8, new long[] {0, 1, 255})));
        m.put("a.int8", GgufValue.array(GgufArray.ints(GgufValueType.INT8, new long[] {-128, 0, 127})));
        m.put("a.uint16", GgufValue.array(GgufArray.ints(GgufValueType.UINT16, new long[] {65535})));
        m.put("a.int16", GgufValue.array(GgufArray.ints(GgufValueType.INT16, new long[] {-2, 2})));
        m.put("a.uint32", GgufValue.array(GgufArray.ints(GgufValueType.UINT32, new long[] {7, 4294967295L})));
        m.put("a.int32", GgufValue.array(GgufArray.ints(GgufValueType.INT32, new long[] {1, 2, 3, -3})));
        m.put("a.uint64", GgufValue.array(GgufArray.ints(GgufValueType.UINT64, new long[] {Long.MAX_VALUE})));
        m.put("a.int64", GgufValue.array(GgufArray.ints(GgufValueType.INT64, new long[] {-5})));
        m.put("a.float32", GgufValue.array(GgufArray.floats(new float[] {0.5f, -0f, Float.MAX_VALUE})));
        m.put("a.float64", GgufValue.array(new GgufArray(GgufValueType.FLOAT64, new double[] {1.25, -2})));
        m.put("a.bool", GgufValue.array(new GgufArray(GgufValueType.BOOL, new boolean[] {true, false})));
        m.put("a.string", GgufValue.array(GgufArray.strings(new String[] {"Ġt", "", "<|user|>"})));
        m.put("a.empty", GgufValue.array(GgufArray.strings(new String[0])));
        GgufArray inner1 = GgufArray.ints(GgufValueType.INT32, new long[] {1, 2});
        GgufArray inner2 = GgufArray.strings(new String[] {"x"});
        GgufArray middle = new GgufArray(GgufValueType.ARRAY, new GgufArray[] {inner1, inner2});
        m.put("a.nested", GgufValue.array(new GgufArray(GgufValueType.ARRAY, new GgufArray[] {middle, middle})));
        return m;
    }

    static List<TensorSpec> someTensors() {
        return List.of(
                new TensorSpec("token_embd.weight", new long[] {64, 10}, GgmlType.Q4_0),
                new TensorSpec("blk.0.attn_norm.weight", new long[] {5}, GgmlType.F32),
                new TensorSpec("empty", new long[] {0, 3}, GgmlType.F32),
                new TensorSpec("blk.0.attn_k_b.weight", new long[] {32, 3, 2}, GgmlType.Q8_0),
                new TensorSpec("blk.0.h", new long[] {3, 7}, GgmlType.F16),
                new TensorSpec("blk.0.k", new long[] {256, 2}, GgmlType.Q4_K));
    }

    /** Writes random bytes for every tensor in pieces of random size; returns each tensor's bytes. */
    static List<byte[]> writeRandom(Path file, Map<String, GgufValue> metadata, List<TensorSpec> tensors, long seed)
            throws IOException {
        Random random = new Random(seed);
        List<byte[]> data = new ArrayList<>();
        try (GgufWriter w = GgufWriter.create(file, metadata, tensors)) {
            for (TensorSpec t : tensors) {
                byte[] bytes = new byte[(int) t.size()];
                random.nextBytes(bytes);
                data.add(bytes);
                int pos = 0;
                while (pos < bytes.length) {
                    int n = Math.min(bytes.length - pos, 1 + random.nextInt(40));
                    w.write(ByteBuffer.wrap(bytes, pos, n));
                    pos += n;
                }
            }
            assertEquals(null, w.currentTensor());
            assertEquals(w.totalBytes(), w.bytesWritten());
        }
        return data;
    }

    @Test
    void roundTripKeepsMetadataTensorsAndBytes() throws Exception {
        Path file = dir.resolve("m.gguf");
        Map<String, GgufValue> metadata = everyValueType();
        List<TensorSpec> tensors = someTensors();
        List<byte[]> data = writeRandom(file, metadata, tensors, 7);

        try (GgufFile f = GgufFile.open(file)) {
            assertEquals(3, f.version());
            assertEquals(32, f.alignment());
            assertEquals(
                    List.copyOf(metadata.keySet()),
                    List.copyOf(f.metadata().entries().keySet()));
            assertEquals(metadata, f.metadata().entries());
            assertEquals(tensors.size(), f.tensors().size());
            for (int i = 0; i < tensors.size(); i++) {
                TensorSpec spec = tensors.get(i);
                TensorInfo info = f.tensors().get(i);
                assertEquals(spec.name(), info.name());
                assertArrayEquals(spec.shape(), info.shape());
                assertEquals(spec.type(), info.type());
                assertEquals(spec.size(), info.size());
                assertEquals(0, f.fileOffset(info) % 32, info.name());
                assertArrayEquals(data.get(i), f.data(info).toArray(ValueLayout.JAVA_BYTE), info.name());
            }
            assertEquals(Files.size(file), f.fileSize());
        }
    }

    @Test
    void honoursACustomAlignment() throws Exception {
        Path file = dir.resolve("a.gguf");
        Map<String, GgufValue> metadata = new LinkedHashMap<>();
        metadata.put(GgufFile.ALIGNMENT_KEY, GgufValue.uint32(256));
        List<TensorSpec> tensors = List.of(
                new TensorSpec("a", new long[] {3}, GgmlType.F32),
                new TensorSpec("b", new long[] {5}, GgmlType.F16),
                new TensorSpec("c", new long[] {32}, GgmlType.Q8_0));
        List<byte[]> data = writeRandom(file, metadata, tensors, 1);
        try (GgufFile f = GgufFile.open(file)) {
            assertEquals(256, f.alignment());
            assertEquals(0, f.dataOffset() % 256);
            for (int i = 0; i < tensors.size(); i++) {
                TensorInfo t = f.tensors().get(i);
                assertEquals(0, t.offset() % 256);
                assertArrayEquals(data.get(i), f.data(t).toArray(ValueLayout.JAVA_BYTE));
            }
        }
    }

    @Test
    void readsBackTheOracleFileWrittenAgainByteForByte() throws Exception {
        // Copy tiny-q4_0.gguf through the writer: same metadata, same tensors, same data. The oracle
        // generator pads the header and tensors the same way, so the copy must be identical.
        Path source = GgufFileTest.oracle("tiny-q4_0.gguf");
        Path copy = dir.resolve("copy.gguf");
        try (GgufFile f = GgufFile.open(source)) {
            List<TensorSpec> specs = f.tensors().stream()
                    .map(t -> new TensorSpec(t.name(), t.shape(), t.type()))
                    .toList();
            try (GgufWriter w = GgufWriter.create(copy, f.metadata().entries(), specs)) {
                for (TensorInfo t : f.tensors()) {
                    w.write(f.data(t).asByteBuffer());
                }
            }
        }
        assertArrayEquals(Files.readAllBytes(source), Files.readAllBytes(copy));
    }

    @Test
    void anUnfinishedWriteLeavesNoFile() throws Exception {
        Path file = dir.resolve("unfinished.gguf");
        List<TensorSpec> tensors = List.of(new TensorSpec("a", new long[] {8}, GgmlType.F32));
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> {
            try (GgufWriter w = GgufWriter.create(file, Map.of(), tensors)) {
                w.write(ByteBuffer.allocate(12));
            }
        });
        assertTrue(e.getMessage().contains("tensor a got 12 of 32 bytes"), e.getMessage());
        assertFalse(Files.exists(file));
        try (var listing = Files.list(dir)) {
            assertEquals(0, listing.count(), "the temporary file must be gone too");
        }
    }

    @Test
    void refusesDataBeyondTheCurrentTensor() throws Exception {
        Path file = dir.resolve("over.gguf");
        List<TensorSpec> tensors = List.of(
                new TensorSpec("a", new long[] {2}, GgmlType.F32), new TensorSpec("b", new long[] {2}, GgmlType.F32));
        try (GgufWriter w = GgufWriter.create(file, Map.of(), tensors)) {
            IllegalArgumentException e =
                    assertThrows(IllegalArgumentException.class, () -> w.write(ByteBuffer.allocate(12)));
            assertTrue(e.getMessage().contains("tensor a has 8 bytes left"), e.getMessage());
            w.write(ByteBuffer.allocate(8));
            w.write(ByteBuffer.allocate(8));
        }
        try (GgufFile f = GgufFile.open(file)) {
            assertEquals(
                    List.of("a", "b"),
                    f.tensors().stream().map(TensorInfo::name).toList());
        }
    }

    @Test
    void refusesHeadersThatWouldNotBeValid() {
        Path file = dir.resolve("bad.gguf");
        assertThrows(
                IllegalArgumentException.class,
                () -> GgufWriter.create(
                        file, Map.of(), List.of(new TensorSpec("q", new long[] {48, 2}, GgmlType.Q4_0))),
                "row not a multiple of 32");
        assertThrows(
                IllegalArgumentException.class,
                () -> GgufWriter.create(
                        file,
                        Map.of(),
                        List.of(
                                new TensorSpec("x", new long[] {1}, GgmlType.F32),
                                new TensorSpec("x", new long[] {1}, GgmlType.F32))));
        assertThrows(
                IllegalArgumentException.class,
                () -> GgufWriter.create(
                        file, Map.of(), List.of(new TensorSpec("n".repeat(64), new long[] {1}, GgmlType.F32))));
        assertThrows(
                IllegalArgumentException.class,
                () -> GgufWriter.create(file, Map.of(GgufFile.ALIGNMENT_KEY, GgufValue.uint32(48)), List.of()));
        assertThrows(
                IllegalArgumentException.class,
                () -> GgufWriter.create(file, Map.of("k", new GgufValue(GgufValueType.UINT8, 256L)), List.of()));
        assertThrows(
                IllegalArgumentException.class,
                () -> GgufWriter.create(file, Map.of("k", new GgufValue(GgufValueType.FLOAT32, 1.0)), List.of()));
        assertFalse(Files.exists(file));
    }
}
