package dev.glimmer.engine.tensor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.gguf.TensorInfo;
import java.nio.file.Path;
import java.util.EnumSet;
import java.util.Iterator;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * Every quantized tensor of small-q4_k_m.gguf dequantizes to ggml's values in
 * refs/small-q4_k_m.dequant.json (its first and last row), bit for bit.
 */
class DequantizerOracleTest {

    @Test
    void everyQuantizedTensorOfTheQ4KMFileMatchesGgml() throws Exception {
        JsonNode tensors = new ObjectMapper()
                .readTree(Path.of("src/test/resources/oracle/refs/small-q4_k_m.dequant.json")
                        .toFile())
                .get("tensors");
        Set<GgmlType> typesSeen = EnumSet.noneOf(GgmlType.class);
        int rowsChecked = 0;
        try (GgufFile file = OracleFiles.open("small-q4_k_m.gguf")) {
            for (Iterator<Map.Entry<String, JsonNode>> it = tensors.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> entry = it.next();
                TensorInfo t = file.tensor(entry.getKey());
                assertEquals(
                        entry.getValue().get("type").asText(),
                        t.type().ggmlName().toUpperCase(java.util.Locale.ROOT),
                        t.name());
                typesSeen.add(t.type());
                int n = (int) t.ne(0);
                float[] row = new float[n];
                for (Iterator<Map.Entry<String, JsonNode>> rows =
                                entry.getValue().get("rows").fields();
                        rows.hasNext(); ) {
                    Map.Entry<String, JsonNode> r = rows.next();
                    long rowIndex = Long.parseLong(r.getKey());
                    Dequantizer.dequantizeRow(t.type(), file.data(t), rowIndex * t.rowBytes(), row, 0, n);
                    JsonNode expected = r.getValue();
                    assertEquals(n, expected.size());
                    for (int i = 0; i < n; i++) {
                        // 9 significant digits identify a float32 exactly, and ggml's float
                        // arithmetic is reproduced operation by operation: expect identical bits.
                        float want = (float) expected.get(i).asDouble();
                        assertEquals(want, row[i], t.name() + " row " + rowIndex + " value " + i);
                    }
                    rowsChecked++;
                }
            }
        }
        assertEquals(EnumSet.of(GgmlType.Q4_K, GgmlType.Q5_K, GgmlType.Q6_K, GgmlType.Q5_0), typesSeen);
        assertTrue(rowsChecked >= 2 * 47, "rows checked: " + rowsChecked);
    }
}
