package dev.glimmer.engine.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.gguf.GgufValue;
import dev.glimmer.engine.gguf.GgufWriter;
import dev.glimmer.engine.gguf.GgufWriter.TensorSpec;
import dev.glimmer.engine.gguf.TensorInfo;
import dev.glimmer.engine.tensor.GgmlType;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ModelFactsTest {

    @TempDir
    Path dir;

    static Path oracle(String name) {
        return Path.of("src/test/resources/oracle", name);
    }

    /**
     * Bytes per decode token computed from the oracle manifest alone (its tensor list and config):
     * token_embd one row, expert stacks used/count of their bytes, everything else in full.
     */
    private static long perTokenFromManifest(JsonNode manifest) {
        int experts = manifest.get("config").get("n_expert").asInt();
        int used = manifest.get("config").get("n_expert_used").asInt();
        long total = 0;
        for (JsonNode t : manifest.get("tensors")) {
            GgmlType type = GgmlType.valueOf(t.get("type").asText().toUpperCase(Locale.ROOT));
            long elements = 1;
            for (JsonNode d : t.get("ne")) {
                elements *= d.asLong();
            }
            long bytes = elements / type.blockSize * type.bytesPerBlock;
            String name = t.get("name").asText();
            if (name.equals("token_embd.weight")) {
                total += bytes / t.get("ne").get(1).asLong();
            } else if (name.endsWith("_exps.weight")) {
                total += bytes / experts * used;
            } else {
                total += bytes;
            }
        }
        return total;
    }

    @Test
    void factsOfTheOracleFilesMatchTheirManifests() throws Exception {
        for (String model : List.of("tiny-f32", "tiny-q8_0", "tiny-q4_0", "small-q4_k_m")) {
            JsonNode manifest =
                    new ObjectMapper().readTree(oracle(model + ".manifest.json").toFile());
            try (GgufFile f = GgufFile.open(oracle(model + ".gguf"))) {
                ModelFacts facts = ModelFacts.of(f);
                JsonNode config = manifest.get("config");
                JsonNode vocab = manifest.get("vocab");
                assertEquals("deepseek2", facts.architecture(), model);
                assertEquals(config.get("name").asText(), facts.name(), model);
                // small-q4_k_m's manifest describes the F32 file it was quantized from: sizes and types differ.
                boolean manifestDescribesThisFile = manifest.get("file_size").asLong() == facts.fileSize();
                assertEquals(!model.startsWith("small"), manifestDescribesThisFile, model);
                assertEquals(3, facts.ggufVersion());
                assertEquals(
                        config.get("n_layer").asLong(),
                        facts.hyperParameters().get("block_count").value());
                assertEquals(
                        config.get("n_expert").asLong(),
                        facts.hyperParameters().get("expert_count").value());
                assertEquals(
                        config.get("n_embd").asLong(),
                        facts.hyperParameters().get("embedding_length").value());

                ModelFacts.TokenizerFacts tok = facts.tokenizer();
                assertEquals("gpt2", tok.model());
                assertEquals("glm4", tok.pre());
                assertEquals(vocab.get("size").asInt(), tok.vocabSize(), model);
                assertEquals(vocab.get("n_merges").asInt(), tok.mergeCount(), model);
                JsonNode specials = vocab.get("special_ids");
                assertEquals(specials.get("[gMASK]").asLong(), tok.specialIds().get("bos"));
                assertEquals(
                        specials.get("<|endoftext|>").asLong(), tok.specialIds().get("eos"));
                assertEquals(specials.get("<|user|>").asLong(), tok.specialIds().get("eot"));
                assertEquals(
                        specials.get("<|observation|>").asLong(),
                        tok.specialIds().get("eom"));
                assertEquals(
                        specials.get("<|endoftext|>").asLong(), tok.specialIds().get("pad"));
                assertEquals(
                        specials.get("<|endoftext|>").asLong(), tok.specialIds().get("unk"));
                assertTrue(tok.chatTemplate());
                assertTrue(tok.bundledChatTemplate(), model + " carries the real GLM-4.7-Flash template");

                JsonNode tensors = manifest.get("tensors");
                assertEquals(tensors.size(), facts.tensorCount());
                Map<GgmlType, Integer> byType = new LinkedHashMap<>();
                for (JsonNode t : tensors) {
                    byType.merge(GgmlType.valueOf(t.get("type").asText().toUpperCase(Locale.ROOT)), 1, Integer::sum);
                }
                if (manifestDescribesThisFile) {
                    assertEquals(byType, facts.tensorsByType(), model);
                    assertEquals(perTokenFromManifest(manifest), facts.weightBytesPerToken(), model);
                }
                assertTrue(facts.weightBytes() < facts.fileSize());
            }
        }
    }

    @Test
    void theNextNBlockIsNotReadPerToken() throws Exception {
        // tiny-f32 rewritten with a NextN block appended (block_count 3 -> 4, nextn_predict_layers 1):
        // the bytes per token must not change, the total weight bytes must.
        Path withNextN = dir.resolve("nextn.gguf");
        long perTokenBefore;
        long weightBytesBefore;
        try (GgufFile f = GgufFile.open(oracle("tiny-f32.gguf"))) {
            ModelFacts before = ModelFacts.of(f);
            perTokenBefore = before.weightBytesPerToken();
            weightBytesBefore = before.weightBytes();
            Map<String, GgufValue> metadata = new LinkedHashMap<>(f.metadata().entries());
            metadata.put("deepseek2.block_count", GgufValue.uint32(4));
            metadata.put("deepseek2.nextn_predict_layers", GgufValue.uint32(1));
            List<TensorSpec> specs = new ArrayList<>();
            for (TensorInfo t : f.tensors()) {
                specs.add(new TensorSpec(t.name(), t.shape(), t.type()));
            }
            List<TensorInfo> block2 = f.tensors().stream()
                    .filter(t -> t.name().startsWith("blk.2."))
                    .toList();
            for (TensorInfo t : block2) {
                specs.add(new TensorSpec(t.name().replace("blk.2.", "blk.3."), t.shape(), t.type()));
            }
            specs.add(new TensorSpec("blk.3.nextn.eh_proj.weight", new long[] {256, 128}, GgmlType.F32));
            try (GgufWriter w = GgufWriter.create(withNextN, metadata, specs)) {
                for (TensorInfo t : f.tensors()) {
                    w.write(f.data(t).asByteBuffer());
                }
                for (TensorInfo t : block2) {
                    w.write(f.data(t).asByteBuffer());
                }
                w.write(ByteBuffer.allocate(256 * 128 * 4));
            }
        }
        try (GgufFile f = GgufFile.open(withNextN)) {
            ModelFacts after = ModelFacts.of(f);
            assertEquals(perTokenBefore, after.weightBytesPerToken());
            assertTrue(after.weightBytes() > weightBytesBefore);
            assertEquals(1L, after.hyperParameters().get("nextn_predict_layers").value());
        }
    }

    @Test
    void aFileWithoutTokenizerOrTemplateIsDescribedToo() throws Exception {
        Path file = dir.resolve("bare.gguf");
        try (GgufWriter w = GgufWriter.create(
                file,
                Map.of("general.architecture", GgufValue.of("llama")),
                List.of(new TensorSpec("token_embd.weight", new long[] {4, 10}, GgmlType.F32)))) {
            w.write(ByteBuffer.allocate(160));
        }
        try (GgufFile f = GgufFile.open(file)) {
            ModelFacts facts = ModelFacts.of(f);
            assertEquals("llama", facts.architecture());
            assertEquals(0, facts.tokenizer().vocabSize());
            assertFalse(facts.tokenizer().chatTemplate());
            assertFalse(facts.tokenizer().bundledChatTemplate());
            assertEquals(16, facts.weightBytesPerToken(), "one row of token_embd");
            assertEquals(160, facts.weightBytes());
        }
    }
}
