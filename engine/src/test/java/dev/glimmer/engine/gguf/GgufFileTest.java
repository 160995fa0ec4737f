package dev.glimmer.engine.gguf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.tensor.GgmlType;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

class GgufFileTest {

    static Path oracle(String name) {
        return Path.of("src/test/resources/oracle", name);
    }

    @Test
    void readsTheOracleTinyModel() throws Exception {
        try (GgufFile f = GgufFile.open(oracle("tiny-q4_0.gguf"))) {
            assertEquals(3, f.version());
            assertEquals("deepseek2", f.metadata().string("general.architecture"));
            assertEquals(128, f.metadata().integer("deepseek2.embedding_length"));
            assertEquals(1024, f.metadata().stringArray("tokenizer.ggml.tokens").length);
            TensorInfo q = f.tensor("blk.1.ffn_up_exps.weight");
            assertEquals(GgmlType.Q4_0, q.type());
            assertEquals(f.data(q).byteSize(), q.size());
            assertTrue(f.metadata().string("tokenizer.chat_template").startsWith("[gMASK]<sop>"));
        }
    }
}
