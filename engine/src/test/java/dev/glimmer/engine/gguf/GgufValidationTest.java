package dev.glimmer.engine.gguf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.glimmer.engine.gguf.GgufWriter.TensorSpec;
import dev.glimmer.engine.tensor.GgmlType;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** One test per way a GGUF file can be broken; each must end in a GgufFormatException naming the problem. */
class GgufValidationTest {

    private static final int F32 = GgmlType.F32.id;
    private static final int Q4_0 = GgmlType.Q4_0.id;

    @TempDir
    Path dir;

    private GgufFormatException refused(byte[] bytes, String... fragments) throws IOException {
        Path file = Files.write(dir.resolve("broken.gguf"), bytes);
        GgufFormatException e = assertThrows(GgufFormatException.class, () -> {
            try (GgufFile f = GgufFile.open(file)) {
                fail("opened a broken file: " + f.tensors());
            }
        });
        assertTrue(e.getMessage().startsWith("broken.gguf: "), "message should name the file: " + e.getMessage());
        for (String fragment : fragments) {
            assertTrue(e.getMessage().contains(fragment), "'" + fragment + "' not in: " + e.getMessage());
        }
        assertEquals(1, e.getMessage().lines().count(), "one line: " + e.getMessage());
        return e;
    }

    /** A valid file with one f32 tensor of 4 elements, built raw; the base the broken variants start from. */
    private static RawGguf oneTensor(long[] shape, int type, long offset) {
        return RawGguf.header(1, 1).kvU32("k", 1).tensor("t", shape, type, offset);
    }

    @Test
    void theRawBaseFileIsValid() throws IOException {
        Path file = Files.write(
                dir.resolve("ok.gguf"),
                oneTensor(new long[] {4}, F32, 0).data(32, 16).bytes());
        try (GgufFile f = GgufFile.open(file)) {
            assertEquals(16, f.tensor("t").size());
        }
    }

    @Test
    void badMagic() throws IOException {
        byte[] b = oneTensor(new long[] {4}, F32, 0).data(32, 16).bytes();
        b[0] = 'X';
        refused(b, "not a GGUF file", "bad magic");
    }

    @Test
    void tooShortForAMagic() throws IOException {
        refused(new byte[] {'G', 'G'}, "not a GGUF file");
    }

    @Test
    void version1() throws IOException {
        refused(new RawGguf().u32(GgufFile.MAGIC).u32(1).u32(0).u32(0).bytes(), "version 1");
    }

    @Test
    void unsupportedVersion() throws IOException {
        refused(new RawGguf().u32(GgufFile.MAGIC).u32(4).u64(0).u64(0).bytes(), "unsupported GGUF version 4");
    }

    @Test
    void bigEndian() throws IOException {
        refused(
                new RawGguf()
                        .u32(GgufFile.MAGIC)
                        .u32(Integer.reverseBytes(3))
                        .u64(0)
                        .u64(0)
                        .bytes(),
                "big-endian");
    }

    @Test
    void truncatedHeaderAtEveryPoint() throws IOException {
        // A file written by the writer, cut at every byte of its header and at the start of its data.
        Path whole = dir.resolve("whole.gguf");
        GgufWriterTest.writeRandom(whole, GgufWriterTest.everyValueType(), GgufWriterTest.someTensors(), 3);
        byte[] bytes = Files.readAllBytes(whole);
        long dataOffset;
        try (GgufFile f = GgufFile.open(whole)) {
            dataOffset = f.dataOffset();
        }
        for (int cut = 0; cut <= dataOffset; cut++) {
            GgufFormatException e = refused(Arrays.copyOf(bytes, cut));
            String m = e.getMessage();
            assertTrue(m.contains("truncated") || m.contains("not a GGUF file"), "cut at " + cut + ": " + m);
        }
    }

    @Test
    void truncatedData() throws IOException {
        byte[] b = oneTensor(new long[] {4}, F32, 0).data(32, 16).bytes();
        refused(Arrays.copyOf(b, b.length - 1), "truncated", "tensor t", "needs bytes 0..16");
    }

    @Test
    void stringLengthBeyondTheFile() throws IOException {
        refused(
                RawGguf.header(0, 1).u64(1L << 40).u64(0).bytes(),
                "truncated",
                "key of metadata entry 0",
                "length 1099511627776");
        refused(
                RawGguf.header(0, 1)
                        .str("k")
                        .u32(GgufValueType.STRING.id)
                        .u64(-1)
                        .u8('x')
                        .bytes(),
                "truncated",
                "value of k",
                "length 18446744073709551615");
    }

    @Test
    void arrayLengthBeyondTheFile() throws IOException {
        refused(
                RawGguf.header(0, 1)
                        .str("arr")
                        .u32(GgufValueType.ARRAY.id)
                        .u32(GgufValueType.UINT32.id)
                        .u64(1000)
                        .u32(1)
                        .bytes(),
                "truncated",
                "array length of arr",
                "1000");
        refused(
                RawGguf.header(0, 1)
                        .str("arr")
                        .u32(GgufValueType.ARRAY.id)
                        .u32(GgufValueType.STRING.id)
                        .u64(-5)
                        .u64(0)
                        .bytes(),
                "truncated",
                "array length of arr",
                "18446744073709551611");
    }

    @Test
    void absurdCounts() throws IOException {
        refused(RawGguf.header(1L << 62, 0).bytes(), "tensor count 4611686018427387904");
        refused(RawGguf.header(0, -1).bytes(), "metadata count 18446744073709551615");
        refused(RawGguf.header(0, 1000).kvU32("a", 1).bytes(), "metadata count 1000");
    }

    @Test
    void unknownValueType() throws IOException {
        refused(
                RawGguf.header(0, 1).str("weird").u32(13).u32(0).bytes(),
                "metadata key weird",
                "unknown value type 13");
        refused(
                RawGguf.header(0, 1)
                        .str("weird")
                        .u32(GgufValueType.ARRAY.id)
                        .u32(-2)
                        .u64(0)
                        .bytes(),
                "metadata key weird",
                "unknown type 4294967294");
    }

    @Test
    void badBool() throws IOException {
        refused(RawGguf.header(0, 1).str("b").u32(GgufValueType.BOOL.id).u8(2).bytes(), "metadata key b", "bool");
    }

    @Test
    void arraysNestedTooDeep() throws IOException {
        RawGguf raw = RawGguf.header(0, 1).str("deep").u32(GgufValueType.ARRAY.id);
        for (int i = 0; i < 20; i++) {
            raw.u32(GgufValueType.ARRAY.id).u64(1);
        }
        refused(raw.u32(GgufValueType.UINT8.id).u64(0).bytes(), "metadata key deep", "nests arrays");
    }

    @Test
    void unknownGgmlType() throws IOException {
        refused(oneTensor(new long[] {4}, 4, 0).data(32, 16).bytes(), "tensor t", "unknown ggml type id 4");
        refused(oneTensor(new long[] {4}, 1000, 0).data(32, 16).bytes(), "tensor t", "unknown ggml type id 1000");
        refused(oneTensor(new long[] {4}, -1, 0).data(32, 16).bytes(), "tensor t", "unknown ggml type id 4294967295");
    }

    @Test
    void badAlignmentValue() throws IOException {
        for (int bad : new int[] {0, 3, 48, -1}) {
            byte[] b = RawGguf.header(0, 1).kvU32(GgufFile.ALIGNMENT_KEY, bad).bytes();
            refused(b, GgufFile.ALIGNMENT_KEY, "power of two", Integer.toUnsignedString(bad));
        }
        refused(
                RawGguf.header(0, 1)
                        .str(GgufFile.ALIGNMENT_KEY)
                        .u32(GgufValueType.STRING.id)
                        .str("32")
                        .bytes(),
                GgufFile.ALIGNMENT_KEY,
                "uint32",
                "string");
    }

    @Test
    void tensorOffsetMisaligned() throws IOException {
        refused(
                oneTensor(new long[] {4}, F32, 16).data(32, 64).bytes(),
                "tensor t",
                "offset 16",
                "not a multiple of the alignment 32");
    }

    @Test
    void tensorOffsetOutOfBounds() throws IOException {
        refused(
                oneTensor(new long[] {4}, F32, 64).data(32, 64).bytes(),
                "tensor t",
                "needs bytes 64..80",
                "has 64 bytes");
        refused(
                oneTensor(new long[] {4}, F32, 1L << 62).data(32, 64).bytes(),
                "tensor t",
                "needs bytes 4611686018427387904");
        refused(oneTensor(new long[] {4}, F32, -32).data(32, 64).bytes(), "tensor t", "offset 18446744073709551584");
    }

    @Test
    void tensorsOverlapping() throws IOException {
        byte[] b = RawGguf.header(2, 0)
                .tensor("a", new long[] {16}, F32, 0)
                .tensor("b", new long[] {8}, F32, 32)
                .data(32, 128)
                .bytes();
        refused(b, "tensors a and b overlap");
    }

    @Test
    void dimensionProductsThatOverflow() throws IOException {
        refused(oneTensor(new long[] {1L << 32, 1L << 32}, F32, 0).data(32, 16).bytes(), "tensor t", "overflow");
        refused(
                oneTensor(new long[] {32, 1L << 40, 1L << 30}, Q4_0, 0)
                        .data(32, 16)
                        .bytes(),
                "tensor t",
                "overflow");
        // Elements fit in 64 bits, bytes do not.
        refused(oneTensor(new long[] {1L << 31, 1L << 31}, F32, 0).data(32, 16).bytes(), "tensor t", "too large");
    }

    @Test
    void negativeOrTooManyDimensions() throws IOException {
        refused(oneTensor(new long[] {4, -1}, F32, 0).data(32, 16).bytes(), "tensor t", "negative dimension");
        refused(oneTensor(new long[] {1, 1, 1, 1, 4}, F32, 0).data(32, 16).bytes(), "tensor t", "5 dimensions");
    }

    @Test
    void duplicateKeys() throws IOException {
        refused(
                RawGguf.header(0, 2).kvU32("general.x", 1).kvU32("general.x", 2).bytes(),
                "metadata key general.x appears twice");
    }

    @Test
    void duplicateTensorNames() throws IOException {
        byte[] b = RawGguf.header(2, 0)
                .tensor("w", new long[] {8}, F32, 0)
                .tensor("w", new long[] {8}, F32, 32)
                .data(32, 64)
                .bytes();
        refused(b, "tensor w appears twice");
    }

    @Test
    void rowsNotAMultipleOfTheBlockSize() throws IOException {
        refused(oneTensor(new long[] {48, 2}, Q4_0, 0).data(32, 64).bytes(), "tensor t", "q4_0", "48", "block size 32");
    }

    @Test
    void tensorNameTooLong() throws IOException {
        String name = "n".repeat(64);
        refused(
                RawGguf.header(1, 0)
                        .tensor(name, new long[] {4}, F32, 0)
                        .data(32, 16)
                        .bytes(),
                "tensor name",
                "longer than 63");
    }

    @Test
    void namesWithLineBreaksOrHugeLengthsStayOnOneShortLine() throws IOException {
        GgufFormatException e = refused(
                RawGguf.header(0, 1)
                        .str("bad\nkey\r" + "x".repeat(5000))
                        .u32(77)
                        .u32(0)
                        .bytes(),
                "metadata key bad\\u000akey\\u000d",
                "...",
                "unknown value type 77");
        assertTrue(e.getMessage().length() < 200, e.getMessage());
    }

    @Test
    void wrongMetadataTypesAreReportedByKey() throws IOException {
        // Not a broken file, but a broken expectation: typed getters name the key and both types.
        Path file = dir.resolve("typed.gguf");
        try (GgufWriter w =
                GgufWriter.create(file, Map.of("deepseek2.block_count", GgufValue.of("47")), List.<TensorSpec>of())) {
            assertEquals(null, w.currentTensor());
        }
        try (GgufFile f = GgufFile.open(file)) {
            GgufFormatException e =
                    assertThrows(GgufFormatException.class, () -> f.metadata().integer("deepseek2.block_count"));
            assertTrue(
                    e.getMessage().contains("deepseek2.block_count should be an integer, is string"), e.getMessage());
            e = assertThrows(GgufFormatException.class, () -> f.metadata().integer("deepseek2.expert_count"));
            assertTrue(e.getMessage().contains("deepseek2.expert_count is missing"), e.getMessage());
        }
    }
}
