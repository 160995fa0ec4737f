package dev.glimmer.server.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.glimmer.server.EngineTestData;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class InfoCommandTest {

    static final Path ORACLE = EngineTestData.ORACLE;

    @TempDir
    Path dir;

    @Test
    void jsonDescribesTheOracleTinyModelAsItsManifestDoes() throws Exception {
        JsonNode manifest = new ObjectMapper()
                .readTree(ORACLE.resolve("tiny-q4_0.manifest.json").toFile());
        MainTest.Result r =
                MainTest.run("info", "--model", ORACLE.resolve("tiny-q4_0.gguf").toString(), "--json");
        assertEquals(0, r.code(), r.err());
        JsonNode info = new ObjectMapper().readTree(r.out());
        assertEquals("deepseek2", info.get("architecture").asText());
        assertEquals(manifest.get("file_size").asLong(), info.get("file_size").asLong());
        assertEquals(
                manifest.get("config").get("n_layer").asInt(),
                info.get("hyper_parameters").get("block_count").asInt());
        assertEquals(
                manifest.get("config").get("q_lora_rank").asInt(),
                info.get("hyper_parameters").get("attention.q_lora_rank").asInt());
        JsonNode tok = info.get("tokenizer");
        assertEquals(
                manifest.get("vocab").get("size").asInt(), tok.get("vocab_size").asInt());
        assertEquals(
                manifest.get("vocab").get("n_merges").asInt(),
                tok.get("merge_count").asInt());
        assertEquals(
                manifest.get("vocab").get("special_ids").get("[gMASK]").asInt(),
                tok.get("special_ids").get("bos").asInt());
        assertTrue(tok.get("chat_template_is_glm_4_7_flash").asBoolean());
        assertEquals(manifest.get("tensors").size(), info.get("tensor_count").asInt());
        int q4 = 0;
        for (JsonNode t : manifest.get("tensors")) {
            q4 += t.get("type").asText().equals("q4_0") ? 1 : 0;
        }
        assertEquals(q4, info.get("tensors_by_type").get("q4_0").asInt());
        assertTrue(info.get("weight_bytes_per_token").asLong()
                < info.get("weight_bytes").asLong());
    }

    @Test
    void textNamesTheKeyFacts() {
        MainTest.Result r =
                MainTest.run("info", "--model", ORACLE.resolve("tiny-f32.gguf").toString());
        assertEquals(0, r.code(), r.err());
        assertTrue(r.out().contains("architecture    deepseek2"), r.out());
        assertTrue(r.out().contains("expert_count"), r.out());
        assertTrue(r.out().contains("present (the GLM-4.7-Flash template)"), r.out());
        assertTrue(r.out().contains("read per token"), r.out());
    }

    @Test
    void badInputIsAOneLineErrorWithExitCode2() throws Exception {
        MainTest.Result absent =
                MainTest.run("info", "--model", dir.resolve("nope.gguf").toString());
        assertEquals(2, absent.code());
        assertTrue(absent.err().contains("no such file"), absent.err());

        Path notGguf = Files.writeString(dir.resolve("text.gguf"), "hello, not a model");
        MainTest.Result bad = MainTest.run("info", "--model", notGguf.toString());
        assertEquals(2, bad.code());
        assertEquals(1, bad.err().strip().lines().count(), bad.err());
        assertTrue(bad.err().contains("text.gguf: not a GGUF file: bad magic"), bad.err());
    }
}
