package dev.glimmer.engine.synth;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.gguf.GgufMetadata;
import dev.glimmer.engine.gguf.GgufValue;
import dev.glimmer.engine.gguf.GgufValue.GgufArray;
import dev.glimmer.engine.gguf.GgufWriter.TensorSpec;
import dev.glimmer.engine.gguf.TensorInfo;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.GlmWeights;
import dev.glimmer.engine.model.ModelFacts;
import dev.glimmer.engine.tensor.GgmlType;
import dev.glimmer.engine.tensor.Q4_0;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SynthTest {

    @TempDir
    Path dir;

    static Path oracle(String name) {
        return Path.of("src/test/resources/oracle", name);
    }

    private Path synth(SynthPreset preset, SynthWeightType type, long seed, String fileName) throws Exception {
        Path out = dir.resolve(fileName);
        ModelSynthesizer.write(SynthModel.of(preset, type, seed), out, (written, total) -> {});
        return out;
    }

    /** The type of a value, with the element types of arrays (nested ones too). */
    private static String typeOf(GgufValue v) {
        return v.value() instanceof GgufArray a
                ? "array of " + a.elementType()
                : v.type().toString();
    }

    /** Tokenizer contents differ by design (random merges); everything else must be the oracle's value. */
    private static final Set<String> RANDOM_CONTENT =
            Set.of("tokenizer.ggml.tokens", "tokenizer.ggml.merges", "general.name");

    @Test
    void tinyMatchesTheOracleTinyFilesKeyForKeyAndTensorForTensor() throws Exception {
        for (SynthWeightType type : List.of(SynthWeightType.Q4_0, SynthWeightType.F32, SynthWeightType.Q8_0)) {
            String oracleName = "tiny-" + type.name().toLowerCase(Locale.ROOT) + ".gguf";
            Path ours = synth(SynthPreset.TINY, type, 5, "tiny.gguf");
            try (GgufFile o = GgufFile.open(oracle(oracleName));
                    GgufFile s = GgufFile.open(ours)) {
                Map<String, GgufValue> om = o.metadata().entries();
                Map<String, GgufValue> sm = s.metadata().entries();
                assertEquals(List.copyOf(om.keySet()), List.copyOf(sm.keySet()), "key order, " + oracleName);
                for (String key : om.keySet()) {
                    assertEquals(typeOf(om.get(key)), typeOf(sm.get(key)), key);
                    if (!RANDOM_CONTENT.contains(key)) {
                        assertEquals(om.get(key), sm.get(key), key + " in " + oracleName);
                    }
                }
                assertEquals(o.alignment(), s.alignment());
                assertEquals(o.tensors().size(), s.tensors().size());
                for (int i = 0; i < o.tensors().size(); i++) {
                    TensorInfo ot = o.tensors().get(i);
                    TensorInfo st = s.tensors().get(i);
                    assertEquals(ot.name(), st.name());
                    assertArrayEquals(ot.shape(), st.shape(), ot.name());
                    assertEquals(ot.type(), st.type(), ot.name());
                    assertEquals(ot.offset(), st.offset(), ot.name());
                }
                ModelFacts of = ModelFacts.of(o);
                ModelFacts sf = ModelFacts.of(s);
                assertEquals(of.hyperParameters(), sf.hyperParameters());
                assertEquals(of.tokenizer(), sf.tokenizer());
                assertEquals(of.tensorsByType(), sf.tensorsByType());
                assertEquals(of.weightBytes(), sf.weightBytes());
                assertEquals(of.weightBytesPerToken(), sf.weightBytesPerToken());
                // The random vocabulary keeps the oracle's layout: byte tokens, specials and pads in place.
                String[] otok = o.metadata().stringArray("tokenizer.ggml.tokens");
                String[] stok = s.metadata().stringArray("tokenizer.ggml.tokens");
                assertArrayEquals(Arrays.copyOf(otok, 256), Arrays.copyOf(stok, 256));
                int normal = 256 + s.metadata().stringArray("tokenizer.ggml.merges").length;
                assertArrayEquals(
                        Arrays.copyOfRange(otok, normal, otok.length), Arrays.copyOfRange(stok, normal, stok.length));
            }
        }
    }

    @Test
    void smallMatchesTheOracleSmallManifest() throws Exception {
        JsonNode manifest =
                new ObjectMapper().readTree(oracle("small-q4_k_m.manifest.json").toFile());
        Path ours = synth(SynthPreset.SMALL, SynthWeightType.F32, 1, "small.gguf");
        try (GgufFile s = GgufFile.open(ours);
                GgufFile o = GgufFile.open(oracle("small-q4_k_m.gguf"))) {
            JsonNode tensors = manifest.get("tensors");
            assertEquals(tensors.size(), s.tensors().size());
            for (int i = 0; i < tensors.size(); i++) {
                JsonNode t = tensors.get(i);
                TensorInfo st = s.tensors().get(i);
                assertEquals(t.get("name").asText(), st.name());
                long[] ne = new long[t.get("ne").size()];
                for (int d = 0; d < ne.length; d++) {
                    ne[d] = t.get("ne").get(d).asLong();
                }
                assertArrayEquals(ne, st.shape(), st.name());
                assertEquals(t.get("type").asText(), st.type().ggmlName(), st.name());
            }
            // The quantized oracle file has the same keys (llama-quantize moved two general.* keys).
            assertEquals(
                    Set.copyOf(o.metadata().entries().keySet()),
                    Set.copyOf(s.metadata().entries().keySet()));
            ModelFacts sf = ModelFacts.of(s);
            ModelFacts of = ModelFacts.of(o);
            assertEquals(of.hyperParameters(), sf.hyperParameters());
            assertEquals(of.tokenizer(), sf.tokenizer());
            JsonNode vocab = manifest.get("vocab");
            assertEquals(vocab.get("n_merges").asInt(), sf.tokenizer().mergeCount());
            assertEquals(vocab.get("special_base").asInt(), SynthPreset.SMALL.specialBase());
        }
    }

    /**
     * The Q4_K_M mix gives every tensor of the small preset the type llama-quantize gave the oracle's
     * small-q4_k_m (Q4_K, Q6_K output and late ffn_down, Q5_K attention output of an 8-expert model, Q5_0
     * where rows are not whole 256-value blocks); the full preset's types follow the same rules.
     */
    @Test
    void q4_K_MIsLlamaQuantizesMix() throws Exception {
        Path ours = synth(SynthPreset.SMALL, SynthWeightType.Q4_K_M, 1, "small-q4_k_m.gguf");
        try (GgufFile s = GgufFile.open(ours);
                GgufFile o = GgufFile.open(oracle("small-q4_k_m.gguf"))) {
            Map<String, GgmlType> oracleTypes = new java.util.HashMap<>();
            o.tensors().forEach(t -> oracleTypes.put(t.name(), t.type()));
            assertEquals(oracleTypes.size(), s.tensors().size());
            for (TensorInfo t : s.tensors()) {
                assertEquals(oracleTypes.get(t.name()), t.type(), t.name());
            }
            assertEquals(
                    15L,
                    ((Number) s.metadata().entries().get("general.file_type").value()).longValue());
        }
        // The full preset: Q6_K output and ffn_down of layers 0-4, 41-46 and every third between, Q5_0 key heads.
        List<TensorSpec> full = SynthModel.tensors(
                SynthPreset.FULL, SynthWeightType.Q4_K_M, false); // without the (slow) full vocabulary
        Map<String, GgmlType> types = new java.util.HashMap<>();
        full.forEach(t -> types.put(t.name(), t.type()));
        assertEquals(GgmlType.Q6_K, types.get("output.weight"));
        assertEquals(GgmlType.Q4_K, types.get("token_embd.weight"));
        assertEquals(GgmlType.Q6_K, types.get("blk.0.ffn_down.weight"));
        assertEquals(GgmlType.Q6_K, types.get("blk.4.ffn_down_exps.weight"));
        assertEquals(GgmlType.Q4_K, types.get("blk.5.ffn_down_exps.weight"));
        assertEquals(GgmlType.Q6_K, types.get("blk.7.ffn_down_shexp.weight"));
        assertEquals(GgmlType.Q6_K, types.get("blk.41.ffn_down_exps.weight"));
        assertEquals(GgmlType.Q4_K, types.get("blk.39.ffn_down_exps.weight"));
        assertEquals(GgmlType.Q4_K, types.get("blk.7.ffn_gate_exps.weight"));
        assertEquals(GgmlType.Q4_K, types.get("blk.7.attn_output.weight"));
        assertEquals(GgmlType.Q5_0, types.get("blk.7.attn_k_b.weight"));
        assertEquals(GgmlType.Q4_K, types.get("blk.7.attn_v_b.weight"));
        assertEquals(281, full.stream().filter(t -> t.type() == GgmlType.F32).count());
    }

    @Test
    void theMtpBlockIsWrittenAfterTheTrunkAndLoads() throws Exception {
        Path trunkOnly = synth(SynthPreset.TINY, SynthWeightType.F32, 5, "tiny.gguf");
        Path withMtp = dir.resolve("tiny-mtp.gguf");
        ModelSynthesizer.write(
                SynthModel.of(SynthPreset.TINY, SynthWeightType.F32, 5, true), withMtp, (written, total) -> {});
        try (GlmModel a = GlmModel.open(trunkOnly);
                GlmModel b = GlmModel.open(withMtp)) {
            assertEquals(3, b.config().layers(), "the trunk");
            assertEquals(1, b.config().nextnLayers());
            assertEquals(4L, b.file().metadata().integer("deepseek2.block_count"));
            assertNull(a.weights().nextn());
            GlmWeights.NextN nextn = b.weights().nextn();
            assertEquals("blk.3.nextn.eh_proj.weight", nextn.ehProj().name());
            assertEquals(256, nextn.ehProj().cols(), "embedding and hidden state, concatenated");
            assertEquals(128, nextn.ehProj().rows());
            assertEquals("blk.3.attn_q_a.weight", nextn.layer().qA().name());
            assertNotNull(nextn.layer().moe(), "a MoE block");
            // Norm gains around 1 as the trunk's; embedding and head are the trunk's (no nextn.embed_tokens and
            // nextn.shared_head_head in the file), the head norm its own.
            assertEquals(1.0, mean(nextn.enorm()), 0.01);
            assertEquals(1.0, mean(nextn.hnorm()), 0.01);
            assertSame(b.weights().tokenEmbedding(), nextn.embedding());
            assertSame(b.weights().output(), nextn.head());
            assertEquals(1.0, mean(nextn.headNorm()), 0.01);
            // Each tensor's values come from a stream of its own name: the trunk is the same bytes with or without.
            for (TensorInfo t : a.file().tensors()) {
                TensorInfo u = b.file().tensor(t.name());
                assertEquals(-1L, a.file().data(t).mismatch(b.file().data(u)), t.name());
            }
        }
        // The full preset with the block: 48 blocks, the 47th's 18 tensors and the 4 of nextn after the trunk's 844.
        List<TensorSpec> full = SynthModel.tensors(SynthPreset.FULL, SynthWeightType.Q4_0, true);
        assertEquals(844 + 18 + 4, full.size());
        assertTrue(full.stream()
                .anyMatch(t -> t.name().equals("blk.47.nextn.eh_proj.weight")
                        && Arrays.equals(t.shape(), new long[] {4096, 2048})));
    }

    @Test
    void theFullPresetHasTheRealShapes() {
        // Header only: the real file is ~17 GB. docs/MODEL.md §3: 844 tensors, 281 F32 + 563 quantized,
        // ~16.9 GB in Q4_0 and ~2.04 GB of weights read per decode token.
        SynthModel model = SynthModel.of(SynthPreset.FULL, SynthWeightType.Q4_0, 1);
        List<TensorSpec> tensors = model.tensors();
        assertEquals(844, tensors.size());
        assertEquals(281, tensors.stream().filter(t -> t.type() == GgmlType.F32).count());
        assertEquals(
                563, tensors.stream().filter(t -> t.type() == GgmlType.Q4_0).count());
        assertEquals(
                new TensorSpec("blk.46.ffn_down_exps.weight", new long[] {1536, 2048, 64}, GgmlType.Q4_0),
                tensors.stream()
                        .filter(t -> t.name().equals("blk.46.ffn_down_exps.weight"))
                        .findFirst()
                        .orElseThrow());
        assertEquals(new TensorSpec("output.weight", new long[] {2048, 154880}, GgmlType.Q4_0), tensors.getLast());
        long size = ModelSynthesizer.fileSize(model);
        assertTrue(Math.abs(size / 16.9e9 - 1) < 0.01, "file size " + size);

        List<TensorInfo> infos = new ArrayList<>();
        for (TensorSpec t : tensors) {
            infos.add(new TensorInfo(t.name(), t.shape(), t.type(), 0, t.size()));
        }
        long perToken = ModelFacts.weightBytesPerToken(new GgufMetadata(model.metadata()), infos);
        assertTrue(Math.abs(perToken / 2.04e9 - 1) < 0.01, "per token " + perToken);

        String[] tokens = (String[])
                ((GgufArray) model.metadata().get("tokenizer.ggml.tokens").value()).values();
        assertEquals(154880, tokens.length);
        assertEquals("<|endoftext|>", tokens[154820]);
        assertEquals("[gMASK]", tokens[154822]);
        assertEquals("<|user|>", tokens[154827]);
        assertEquals("<|observation|>", tokens[154829]);
        assertEquals("<think>", tokens[154841]);
        assertEquals("</think>", tokens[154842]);
        assertEquals("<|video|>", tokens[154855]);
        assertEquals("[PAD154856]", tokens[154856]);
        assertEquals("!", tokens[0]);
    }

    @Test
    void vocabularyIsAValidByteLevelBpe() {
        SynthVocab v = SynthVocab.build(SynthPreset.SMALL, 9);
        Set<String> seen = new HashSet<>();
        for (String t : v.tokens()) {
            assertTrue(seen.add(t), "duplicate token " + t);
        }
        for (int i = 0; i < v.merges().length; i++) {
            String[] parts = v.merges()[i].split(" ");
            assertEquals(2, parts.length, v.merges()[i]);
            assertEquals(parts[0] + parts[1], v.tokens()[256 + i], "merge " + i + " makes token " + (256 + i));
            assertTrue(
                    Arrays.asList(v.tokens()).subList(0, 256 + i).containsAll(List.of(parts)),
                    "merge " + i + " joins earlier tokens");
        }
        assertEquals(SynthVocab.CONTROL, v.tokenTypes()[SynthPreset.SMALL.specialBase()]);
        assertEquals(SynthVocab.UNUSED, v.tokenTypes()[256 + v.merges().length]);
        assertEquals(SynthVocab.NORMAL, v.tokenTypes()[255 + v.merges().length]);
    }

    @Test
    void sameSeedSameBytesOtherSeedOtherWeights() throws Exception {
        Path a = synth(SynthPreset.TINY, SynthWeightType.Q8_0, 11, "a.gguf");
        Path b = synth(SynthPreset.TINY, SynthWeightType.Q8_0, 11, "b.gguf");
        Path c = synth(SynthPreset.TINY, SynthWeightType.Q8_0, 12, "c.gguf");
        assertArrayEquals(Files.readAllBytes(a), Files.readAllBytes(b));
        try (GgufFile fa = GgufFile.open(a);
                GgufFile fc = GgufFile.open(c)) {
            TensorInfo t = fa.tensor("blk.1.ffn_up_exps.weight");
            assertFalse(Arrays.equals(
                    fa.data(t).toArray(ValueLayout.JAVA_BYTE),
                    fc.data(fc.tensor(t.name())).toArray(ValueLayout.JAVA_BYTE)));
            assertNotEquals(
                    fa.metadata().get("tokenizer.ggml.merges"), fc.metadata().get("tokenizer.ggml.merges"));
        }
    }

    @Test
    void weightsHaveSensibleScalesAndQuantizedFilesQuantizeTheSameValues() throws Exception {
        Path f32 = synth(SynthPreset.TINY, SynthWeightType.F32, 3, "f32.gguf");
        Path q4 = synth(SynthPreset.TINY, SynthWeightType.Q4_0, 3, "q4.gguf");
        try (GgufFile f = GgufFile.open(f32);
                GgufFile q = GgufFile.open(q4)) {
            float[] norm = floats(f, "blk.0.attn_norm.weight");
            assertEquals(1.0, mean(norm), 0.01);
            float[] w = floats(f, "blk.1.ffn_gate_exps.weight");
            assertEquals(0.0, mean(w), 0.001);
            assertEquals(0.02, Math.sqrt(variance(w)), 0.001);
            // The Q4_0 file holds the reference quantization of the very values of the F32 file.
            TensorInfo t = q.tensor("blk.1.ffn_gate_exps.weight");
            byte[] expected = Q4_0.quantizeRow(w, 0, w.length);
            assertArrayEquals(expected, q.data(t).toArray(ValueLayout.JAVA_BYTE));
            assertEquals(GgmlType.F32, q.tensor("blk.1.ffn_gate_inp.weight").type());
            assertEquals(GgmlType.F32, q.tensor("blk.1.exp_probs_b.bias").type());
        }
    }

    @Test
    void randomBlocksOfTheFullPresetSpreadLikeQuantizedWeights() {
        assertTrue(SynthPreset.FULL.randomBlocks());
        assertFalse(SynthPreset.TINY.randomBlocks());
        int n = 1 << 16;
        for (GgmlType type : List.of(GgmlType.Q4_0, GgmlType.Q8_0)) {
            ByteBuffer b = ModelSynthesizer.randomQuantBlocks(type, n, SynthRandom.forStream(1, "w", 0));
            assertEquals(n / 32 * type.bytesPerBlock, b.remaining());
            float[] values = new float[n];
            for (int block = 0; block < n / 32; block++) {
                int at = block * type.bytesPerBlock;
                float d = Float.float16ToFloat(b.getShort(at));
                for (int j = 0; j < 32; j++) {
                    values[block * 32 + j] = type == GgmlType.Q8_0
                            ? d * b.get(at + 2 + j)
                            : d * (((b.get(at + 2 + j % 16) >> (j < 16 ? 0 : 4)) & 0xf) - 8);
                }
            }
            assertEquals(0.0, mean(values), 0.001, type.toString());
            assertEquals(0.02, Math.sqrt(variance(values)), 0.002, type.toString());
        }
        // The other types of the Q4_K_M mix, through the engine's own dequantization: around 0, about 0.02.
        for (GgmlType type : List.of(GgmlType.Q4_K, GgmlType.Q5_K, GgmlType.Q6_K, GgmlType.Q5_0, GgmlType.Q5_1)) {
            ByteBuffer b = ModelSynthesizer.randomQuantBlocks(type, n, SynthRandom.forStream(1, "w", 0));
            assertEquals(n / type.blockSize * type.bytesPerBlock, b.remaining());
            float[] values = new float[n];
            dev.glimmer.engine.tensor.Dequantizer.dequantizeRow(type, MemorySegment.ofBuffer(b), 0, values, 0, n);
            assertEquals(0.0, mean(values), 0.002, type.toString());
            assertEquals(0.02, Math.sqrt(variance(values)), 0.004, type.toString());
        }
    }

    @Test
    void refusesWhenTheDiskIsTooSmallOrTheDirectoryIsMissing() {
        InvalidInputException e = assertThrows(
                InvalidInputException.class,
                () -> ModelSynthesizer.requireFreeSpace(dir, 16_900_000_000L, 10_000_000_000L));
        assertTrue(e.getMessage().contains("not enough free space"), e.getMessage());
        assertTrue(e.getMessage().contains("16.90 GB"), e.getMessage());
        ModelSynthesizer.requireFreeSpace(dir, 16_900_000_000L, 30_000_000_000L);

        e = assertThrows(
                InvalidInputException.class,
                () -> synth(SynthPreset.TINY, SynthWeightType.F32, 1, "missing/dir/x.gguf"));
        assertTrue(e.getMessage().contains("no such directory"), e.getMessage());
    }

    @Test
    void unknownPresetsAndTypesAreNamed() {
        assertTrue(assertThrows(InvalidInputException.class, () -> SynthPreset.byName("huge"))
                .getMessage()
                .contains("unknown preset 'huge' (tiny, small or full)"));
        assertTrue(assertThrows(InvalidInputException.class, () -> SynthWeightType.byName("q4_k"))
                .getMessage()
                .contains("unknown weight type 'q4_k' (f32, f16, q8_0, q4_0, q4_k_m)"));
    }

    private static float[] floats(GgufFile f, String name) {
        MemorySegment data = f.data(f.tensor(name));
        return data.toArray(ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN));
    }

    private static double mean(float[] v) {
        double s = 0;
        for (float x : v) {
            s += x;
        }
        return s / v.length;
    }

    private static double variance(float[] v) {
        double m = mean(v);
        double s = 0;
        for (float x : v) {
            s += (x - m) * (x - m);
        }
        return s / v.length;
    }
}
