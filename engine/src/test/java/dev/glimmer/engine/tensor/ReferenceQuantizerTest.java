package dev.glimmer.engine.tensor;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.gguf.TensorInfo;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

/**
 * The reference quantizers reproduce the bytes llama-quantize wrote: quantizing the F32 weights
 * of tiny-f32.gguf gives exactly the tensor data of tiny-q4_0.gguf / tiny-q8_0.gguf.
 */
class ReferenceQuantizerTest {

    interface RowQuantizer {
        byte[] quantize(float[] x, int offset, int n);
    }

    @Test
    void q4_0MatchesTheOracleFileByteForByte() throws Exception {
        int checked = compareWithOracle("tiny-q4_0.gguf", GgmlType.Q4_0, Q4_0::quantizeRow);
        assertTrue(checked > 10, "expected many Q4_0 tensors, got " + checked);
    }

    @Test
    void q8_0MatchesTheOracleFileByteForByte() throws Exception {
        int checked = compareWithOracle("tiny-q8_0.gguf", GgmlType.Q8_0, Q8_0::quantizeRow);
        assertTrue(checked > 10, "expected many Q8_0 tensors, got " + checked);
    }

    /** Quantizes each row of the F32 original and compares with the quantized file; returns the tensor count. */
    private static int compareWithOracle(String quantizedFile, GgmlType type, RowQuantizer quantizer) throws Exception {
        int tensors = 0;
        try (GgufFile f32 = OracleFiles.open("tiny-f32.gguf");
                GgufFile quantized = OracleFiles.open(quantizedFile)) {
            for (TensorInfo q : quantized.tensors()) {
                if (q.type() != type) {
                    continue;
                }
                TensorInfo original = f32.tensor(q.name());
                assertArrayEquals(q.shape(), original.shape(), q.name());
                float[] values = OracleFiles.f32Values(f32, original);
                int rowLength = (int) q.ne(0);
                long rowBytes = q.rowBytes();
                MemorySegment expected = quantized.data(q);
                for (int row = 0; row < q.rows(); row++) {
                    byte[] actual = quantizer.quantize(values, row * rowLength, rowLength);
                    byte[] want = expected.asSlice(row * rowBytes, rowBytes).toArray(ValueLayout.JAVA_BYTE);
                    assertArrayEquals(want, actual, q.name() + " row " + row);
                }
                tensors++;
            }
        }
        return tensors;
    }

    @Test
    void q8_0RoundsHalvesAwayFromZeroLikeRoundf() {
        // amax 127 gives d = 1 exactly, so x*id is x itself and the halves are real ties.
        float[] x = new float[32];
        x[0] = 127f;
        x[1] = 2.5f;
        x[2] = -2.5f;
        x[3] = 0.5f;
        x[4] = -0.5f;
        x[5] = 1.4999999f;
        byte[] q = Q8_0.quantizeRow(x, 0, 32);
        assertEquals(127, q[2]);
        assertEquals(3, q[3]);
        assertEquals(-3, q[4]);
        assertEquals(1, q[5]);
        assertEquals(-1, q[6]);
        assertEquals(1, q[7]);
    }

    @Test
    void aNaNScaleIsWrittenAsGgmlsCanonicalNaN() {
        // ggml's MAX(amax, |v|) lets a NaN in the last position through, so d = NaN / 127;
        // GGML_FP32_TO_FP16 writes every NaN as 0x7E00 regardless of its payload.
        float[] x = new float[32];
        x[0] = 1f;
        x[31] = Float.intBitsToFloat(0x7FA00001);
        byte[] q = Q8_0.quantizeRow(x, 0, 32);
        assertEquals(0x00, q[0] & 0xFF);
        assertEquals(0x7E, q[1] & 0xFF);
    }

    @Test
    void allZeroBlocksQuantizeToZeroScale() {
        byte[] q4 = Q4_0.quantizeRow(new float[32], 0, 32);
        // 0 / -8 is -0.0: ggml stores a negative-zero scale (fp16 0x8000) for an all-zero block.
        assertEquals(0, q4[0]);
        assertEquals((byte) 0x80, q4[1]);
        for (int j = 2; j < 18; j++) {
            assertEquals((byte) 0x88, q4[j], "q4_0 zero is q = 8");
        }
        byte[] q8 = Q8_0.quantizeRow(new float[32], 0, 32);
        for (byte b : q8) {
            assertEquals(0, b);
        }
    }
}
