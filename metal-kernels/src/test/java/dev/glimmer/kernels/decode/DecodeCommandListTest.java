package dev.glimmer.kernels.decode;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.KernelLibrary;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The command list of the full-size GLM-4.7-Flash (47 layers, Q4_0 with a Q8_0 k_b/v_b, Q6_K output
 * and a shared expert in Q5_K, as llama-quantize lays out a Q4_0 file), built from a tensor table
 * with the real shapes and file offsets.
 */
class DecodeCommandListTest {

    static final ModelShape GLM = new ModelShape(
            47, 1, 2048, 20, 768, 512, 192, 64, 256, 10240, 1536, 64, 4, 1536, 154880, 1e-5f, 1e6f, 1f / 16, 2, 1.8f,
            true);

    /** ggml type ids and block geometry of the types used here. */
    private static long bytes(int type, long elements) {
        return switch (type) {
            case 0 -> elements * 4;
            case 2 -> elements / 32 * 18;
            case 8 -> elements / 32 * 34;
            case 13 -> elements / 256 * 176;
            case 14 -> elements / 256 * 210;
            default -> throw new IllegalArgumentException("type " + type);
        };
    }

    /** Tensors in GGUF order with 32-byte aligned offsets after a 6 MB header, as a real file. */
    static DecodeModel fullSizeModel() {
        return fullSizeModel(false);
    }

    /** With {@code nextn}, the NextN block after the trunk ({@code blk.47.*}), as llama.cpp's converter writes it. */
    static DecodeModel fullSizeModel(boolean nextn) {
        Map<String, WeightTensor> t = new LinkedHashMap<>();
        long[] offset = {6_000_000};
        java.util.function.BiConsumer<String, long[]> add = (name, typeAndElements) -> {
            long b = bytes((int) typeAndElements[0], typeAndElements[1]);
            t.put(name, new WeightTensor(name, (int) typeAndElements[0], offset[0], b));
            offset[0] = (offset[0] + b + 31) / 32 * 32;
        };
        ModelShape s = GLM;
        add.accept("token_embd.weight", new long[] {2, (long) s.embedding() * s.vocab()});
        for (int l = 0; l < s.layers() + (nextn ? 1 : 0); l++) {
            String b = "blk." + l + ".";
            add.accept(b + "attn_norm.weight", new long[] {0, s.embedding()});
            add.accept(b + "attn_q_a.weight", new long[] {2, (long) s.embedding() * s.qLora()});
            add.accept(b + "attn_q_a_norm.weight", new long[] {0, s.qLora()});
            add.accept(b + "attn_q_b.weight", new long[] {2, (long) s.qLora() * s.heads() * (s.nope() + s.rope())});
            add.accept(b + "attn_kv_a_mqa.weight", new long[] {2, (long) s.embedding() * s.kvRow()});
            add.accept(b + "attn_kv_a_norm.weight", new long[] {0, s.latent()});
            add.accept(b + "attn_k_b.weight", new long[] {8, (long) s.nope() * s.latent() * s.heads()});
            add.accept(b + "attn_v_b.weight", new long[] {8, (long) s.latent() * s.vHead() * s.heads()});
            add.accept(b + "attn_output.weight", new long[] {2, (long) s.heads() * s.vHead() * s.embedding()});
            add.accept(b + "ffn_norm.weight", new long[] {0, s.embedding()});
            if (l < s.denseLayers()) {
                add.accept(b + "ffn_gate.weight", new long[] {2, (long) s.embedding() * s.denseFfn()});
                add.accept(b + "ffn_up.weight", new long[] {2, (long) s.embedding() * s.denseFfn()});
                add.accept(b + "ffn_down.weight", new long[] {2, (long) s.denseFfn() * s.embedding()});
            } else {
                add.accept(b + "ffn_gate_inp.weight", new long[] {0, (long) s.embedding() * s.experts()});
                add.accept(b + "exp_probs_b.bias", new long[] {0, s.experts()});
                long e = (long) s.embedding() * s.expertFfn() * s.experts();
                add.accept(b + "ffn_gate_exps.weight", new long[] {2, e});
                add.accept(b + "ffn_up_exps.weight", new long[] {2, e});
                add.accept(b + "ffn_down_exps.weight", new long[] {2, e});
                add.accept(b + "ffn_gate_shexp.weight", new long[] {13, (long) s.embedding() * s.sharedFfn()});
                add.accept(b + "ffn_up_shexp.weight", new long[] {13, (long) s.embedding() * s.sharedFfn()});
                add.accept(b + "ffn_down_shexp.weight", new long[] {13, (long) s.sharedFfn() * s.embedding()});
            }
        }
        if (nextn) {
            String b = "blk." + s.layers() + ".nextn.";
            add.accept(b + "eh_proj.weight", new long[] {2, 2L * s.embedding() * s.embedding()});
            add.accept(b + "enorm.weight", new long[] {0, s.embedding()});
            add.accept(b + "hnorm.weight", new long[] {0, s.embedding()});
            add.accept(b + "shared_head_norm.weight", new long[] {0, s.embedding()});
        }
        add.accept("output_norm.weight", new long[] {0, s.embedding()});
        add.accept("output.weight", new long[] {14, (long) s.embedding() * s.vocab()});
        return new DecodeModel(s, t);
    }

    /**
     * A model with the NextN block: every list of the pool computes the block's rows too (one more KV buffer, the
     * trunk outputs each sequence keeps), a pool of one sequence still gets the batch list of a speculative step's two
     * rows, and the draft list, last, runs the block alone on one token through its own head norm.
     */
    @Test
    void theNextNBlockRunsInEveryListAndAloneInTheDraftList() {
        DecodeModel m = fullSizeModel(true);
        assertTrue(DecodeCommandListBuilder.drafts(m));
        assertTrue(!DecodeCommandListBuilder.drafts(fullSizeModel()));
        List<CommandList> lists = DecodeCommandListBuilder.pool(m, 4096, 1, Geometry.PROMPT_TOKENS);
        assertEquals(
                List.of(1, Geometry.PROMPT_TOKENS, 2, 1),
                lists.stream().map(CommandList::tokens).toList());
        int nextn = GLM.layers();
        for (CommandList list : lists) {
            long kv = list.buffers().stream()
                    .filter(b -> b.kind() == BufferSpec.Kind.KV_CACHE)
                    .count();
            assertEquals(GLM.layers() + 1, kv);
            BufferSpec kept = list.buffers().get(list.buffer(BufferSpec.Kind.TRUNK_OUTPUTS));
            assertEquals(4L * (Geometry.MAX_DRAFTS + 1) * GLM.embedding(), kept.bytes());
            assertTrue(list.dispatches().stream()
                    .anyMatch(d -> d.layer() == nextn && d.kernel().equals("nextn_input")));
        }
        CommandList decode = lists.getFirst();
        assertTrue(decode.dispatches().stream().anyMatch(d -> d.kernel().equals("keep_outputs")));
        CommandList draft = lists.getLast();
        assertTrue(draft.dispatches().stream().allMatch(d -> d.layer() == nextn || d.layer() == -1));
        assertTrue(draft.dispatches().stream().noneMatch(d -> d.kernel().equals("keep_outputs")));
        Set<String> read = new HashSet<>();
        draft.dispatches().forEach(d -> d.weightReads().forEach(r -> read.add(r.tensor())));
        assertTrue(read.contains("blk.47.nextn.shared_head_norm.weight"), read.toString());
        assertTrue(!read.contains("output_norm.weight"), "the block's own head norm, not the trunk's");
        // the memory the pool needs counts the block's KV rows
        long plain = MemoryBudget.of(fullSizeModel(), 4096, 1).kvPool();
        assertEquals(
                plain * (GLM.layers() + 1) / GLM.layers(),
                MemoryBudget.of(m, 4096, 1).kvPool());
    }

    @Test
    void elevenDispatchesPerMoeLayerTenForTheDenseOne() {
        CommandList list = DecodeCommandListBuilder.build(fullSizeModel(), 4096);
        Map<Integer, Integer> perLayer = new HashMap<>();
        for (Dispatch d : list.dispatches()) {
            perLayer.merge(d.layer(), 1, Integer::sum);
        }
        assertEquals(10, perLayer.get(0));
        for (int l = 1; l < GLM.layers(); l++) {
            assertEquals(11, perLayer.get(l), "layer " + l);
        }
        assertEquals(4, perLayer.get(-1)); // embedding, output, the argmax's two stages
        assertEquals(4 + 10 + 46 * 11, list.dispatches().size());
    }

    @Test
    void readsExactlyTheActiveWeights() {
        DecodeModel m = fullSizeModel();
        CommandList list = DecodeCommandListBuilder.build(m, 4096);
        assertEquals(m.activeWeightBytes(), list.weightBytesPerStep());
        Set<String> read = new HashSet<>();
        list.dispatches().forEach(d -> d.weightReads().forEach(r -> read.add(r.tensor())));
        assertEquals(m.tensors().keySet(), read, "every tensor is read");
        // Q4_0 GLM-4.7-Flash: about 2 GB per token (docs/KERNELS.md §10)
        assertTrue(
                list.weightBytesPerStep() > 1.5e9 && list.weightBytesPerStep() < 2.5e9, list.weightBytesPerStep() + "");
    }

    /**
     * The multiply-adds the lists count (bench's TFLOP/s per kernel) are those of the weight matrices each token
     * goes through, counted here from the model's shape: per token the attention's projections, the router, the
     * 4 routed experts and the shared one (the dense FFN in the first layer), and the output rows of every token
     * that gets logits; in the prompt list also the attention's products on the matrix units.
     */
    @Test
    void multiplyAddsAreEachTokensWeightMatrices() {
        DecodeModel m = fullSizeModel();
        ModelShape s = GLM;
        long attention = (long) s.embedding() * (s.qLora() + s.kvRow())
                + (long) s.qLora() * s.heads() * (s.nope() + s.rope())
                + (long) s.heads() * s.nope() * s.latent()
                + (long) s.heads() * s.latent() * s.vHead()
                + (long) s.heads() * s.vHead() * s.embedding();
        long denseFfn = 3L * s.embedding() * s.denseFfn();
        long moe = (long) s.embedding() * s.experts()
                + 3L * s.embedding() * ((long) s.expertsUsed() * s.expertFfn() + s.sharedFfn());
        long perToken = s.layers() * attention + s.denseLayers() * denseFfn + (s.layers() - s.denseLayers()) * moe;
        long output = (long) s.vocab() * s.embedding();
        // about 3B parameters active per token: 2 x 3e9 FLOP per token
        assertTrue(perToken > 2.5e9 && perToken < 3.5e9, perToken + " multiply-adds per token");

        assertEquals(perToken + output, multiplyAdds(DecodeCommandListBuilder.build(m, 4096)), "decode step");
        int tokens = Geometry.PROMPT_TOKENS;
        CommandList prompt = DecodeCommandListBuilder.build(m, 4096, tokens);
        // and the prompt's attention on tiles: query row (t, h) of a batch at the start of a sequence scores t + 1 keys
        // of latent + rope values and sums as many rows of latent values
        long promptAttention = (long) tokens * (tokens + 1) / 2 * s.heads() * (s.kvRow() + s.latent());
        assertEquals(
                tokens * perToken + s.layers() * promptAttention + output,
                multiplyAdds(prompt),
                "prompt batch: only the last token's logits");
        assertEquals(8 * (perToken + output), multiplyAdds(DecodeCommandListBuilder.batch(m, 4096, 8)), "batch of 8");

        // the expert kernels count the routed entries, not the experts' full stacks
        Dispatch gateUp = prompt.dispatches().stream()
                .filter(d -> d.kernel().equals("moe_experts_gate_up") && d.layer() == 1)
                .findFirst()
                .orElseThrow();
        assertEquals(
                2L * tokens * s.embedding() * (s.expertsUsed() * s.expertFfn() + s.sharedFfn()), gateUp.multiplyAdds());
        for (Dispatch d : prompt.dispatches()) {
            boolean multiplies = (d.kernel().startsWith("mat_") && !d.kernel().equals("mat_mat_parts"))
                    || d.kernel().startsWith("moe_experts_")
                    || d.kernel().equals("mla_flash_attention");
            assertEquals(multiplies, d.multiplyAdds() > 0, d.kernel() + " of layer " + d.layer());
        }
    }

    private static long multiplyAdds(CommandList list) {
        return list.dispatches().stream().mapToLong(Dispatch::multiplyAdds).sum();
    }

    @Test
    void everyBindingFitsMetalsLimits() {
        DecodeModel m = fullSizeModel();
        CommandList list = DecodeCommandListBuilder.build(m, 202752);
        KernelLibrary library = KernelLibrary.load();
        assertTrue(
                list.buffers().stream()
                                .filter(b -> b.kind() == BufferSpec.Kind.WEIGHTS)
                                .count()
                        > 1,
                "a 17 GB file needs several weight buffers");
        for (Dispatch d : list.dispatches()) {
            assertTrue(d.bindings().size() <= Geometry.MAX_BUFFER_BINDINGS, d.kernel());
            assertEquals(library.kernel(d.kernel()).bufferCount(), d.bindings().size(), d.kernel());
            assertTrue(d.threadgroupMemoryBytes() <= Geometry.MAX_THREADGROUP_MEMORY, d.kernel());
            for (int b : d.threadgroupMemory()) {
                assertEquals(0, b % 16, d.kernel() + " threadgroup memory length must be a multiple of 16");
            }
            for (Dispatch.Binding b : d.bindings()) {
                assertTrue(
                        b.offset() <= DecodeCommandListBuilder.MAX_BINDING_OFFSET,
                        d.kernel() + " offset " + b.offset());
                assertTrue(
                        b.offset() < list.buffers().get(b.buffer()).bytes(),
                        d.kernel() + " binds past the end of "
                                + list.buffers().get(b.buffer()).name());
            }
        }
        // every tensor lies inside one weight buffer
        for (WeightTensor t : m.tensors().values()) {
            long inside = list.buffers().stream()
                    .filter(b -> b.kind() == BufferSpec.Kind.WEIGHTS
                            && t.fileOffset() >= b.fileOffset()
                            && t.fileOffset() + t.bytes() <= b.fileOffset() + b.bytes())
                    .count();
            assertTrue(inside >= 1, t.name());
        }
    }

    @Test
    void gridsDoNotDependOnTheContext() {
        CommandList a = DecodeCommandListBuilder.build(fullSizeModel(), 1024);
        CommandList b = DecodeCommandListBuilder.build(fullSizeModel(), 202752);
        assertEquals(a.dispatches().size(), b.dispatches().size());
        for (int i = 0; i < a.dispatches().size(); i++) {
            assertEquals(a.dispatches().get(i).grid(), b.dispatches().get(i).grid());
            assertEquals(a.dispatches().get(i).bindings(), b.dispatches().get(i).bindings());
        }
        assertTrue(java.util.Arrays.equals(a.args(), b.args()), "arguments are the same for every context size");
    }

    @Test
    void planSummaryOfTheFullSizeModel() {
        DecodeModel m = fullSizeModel();
        PlanSummary p = PlanSummary.of(m, DecodeCommandListBuilder.build(m, 8192));
        assertEquals(11, p.maxDispatchesPerLayer());
        assertEquals(4 + 10 + 46 * 11, p.dispatches()); // embedding, output mat-vec, two-stage argmax
        assertEquals(46, p.dispatchesPerKernel().get("moe_router"));
        assertEquals(
                4 * 47 + 1, p.dispatchesPerKernel().get("mat_vec")); // q_b, k_b, v_b, attn_output per layer + output
        assertEquals(p.activeWeightBytes(), p.weightBytesPerToken());
        assertTrue(p.threadgroupMemory().values().stream().allMatch(b -> b <= Geometry.MAX_THREADGROUP_MEMORY));
        assertEquals(13, p.maxBindings()); // moe_gate_up
        assertTrue(p.maxBindingOffset() < 1L << 32 && p.maxBindingOffset() > 1L << 30, p.maxBindingOffset() + "");
        // the KV cache in halves: per cached token 576 values x 2 bytes x 47 layers, llama.cpp's F16 cache
        assertEquals(47L * 8192 * 576 * 2, p.kvCacheBytes());
    }

    @Test
    void thePromptListBatchesEveryLayer() {
        DecodeModel m = fullSizeModel();
        int tokens = Geometry.PROMPT_TOKENS;
        CommandList decode = DecodeCommandListBuilder.build(m, 4096);
        CommandList prompt = DecodeCommandListBuilder.build(m, 4096, tokens);
        assertEquals(tokens, prompt.tokens());
        assertEquals(1, decode.tokens());
        // q_a, kv_a and attn_output (few rows) in column parts, added up by mat_mat_parts
        List<String> moeLayer = List.of(
                "rms_norm_rows",
                "mat_mat",
                "mat_mat_parts",
                "mat_mat",
                "mat_mat_parts",
                "rms_norm_rows",
                "mat_mat",
                "mla_rope_cache",
                "mat_mat",
                "mla_flash_attention",
                "mla_flash_merge",
                "mat_mat",
                "mat_mat",
                "mat_mat_parts",
                "rms_norm_rows",
                "mat_mat_float",
                "moe_select",
                "moe_route",
                "moe_experts_gate_up",
                "moe_experts_down",
                "moe_combine");
        List<String> denseLayer = new ArrayList<>(moeLayer);
        denseLayer.remove(17); // moe_route
        denseLayer.remove(16); // moe_select
        denseLayer.remove(15); // the router's mat_mat_float (F32 weights in float, not on the matrix units)
        List<String> expected = new ArrayList<>(List.of("embed_row"));
        expected.addAll(denseLayer);
        for (int l = 1; l < GLM.layers(); l++) {
            expected.addAll(moeLayer);
        }
        expected.addAll(List.of("last_row", "mat_vec", "argmax_parts", "argmax"));
        assertEquals(
                expected, prompt.dispatches().stream().map(Dispatch::kernel).toList());
        int blocks = (tokens + Geometry.MM_TOKENS - 1) / Geometry.MM_TOKENS;
        int expertBlocks = (tokens + Geometry.EXPERT_TOKENS - 1) / Geometry.EXPERT_TOKENS;
        for (Dispatch d : prompt.dispatches()) {
            if (d.kernel().equals("mat_vec")) {
                // the output mat-vec of the last token, as the decode step's
                assertEquals(
                        decode.dispatches().get(decode.dispatches().size() - 3).grid(), d.grid());
                continue;
            }
            if (d.kernel().equals("mat_mat")) {
                // token blocks times column parts: more parts only while the grid is under MM_MIN_THREADGROUPS
                int parts = d.grid().x() / blocks;
                assertEquals(blocks * parts, d.grid().x(), "mat_mat of layer " + d.layer());
                long groups = (long) blocks * d.grid().y() * d.grid().z();
                assertTrue(
                        parts == 1 || groups * parts / 2 < Geometry.MM_MIN_THREADGROUPS,
                        "mat_mat of layer " + d.layer());
                continue;
            }
            int perToken = switch (d.kernel()) {
                case "mat_mat_float" -> (tokens + Geometry.MM_FLOAT_TOKENS - 1) / Geometry.MM_FLOAT_TOKENS;
                // the blocks of the experts' token lists (at most one partly filled per expert), then the shared
                // expert's
                case "moe_experts_gate_up", "moe_experts_down" ->
                    d.layer() == 0
                            ? expertBlocks
                            : (tokens * GLM.expertsUsed() + Geometry.EXPERT_TOKENS - 1) / Geometry.EXPERT_TOKENS
                                    + GLM.experts()
                                    + expertBlocks;
                case "last_row", "argmax" -> 1;
                case "moe_select" -> (tokens + Geometry.WIDE_SIMDGROUPS - 1) / Geometry.WIDE_SIMDGROUPS;
                case "moe_route" -> GLM.experts();
                case "argmax_parts" -> Geometry.ARGMAX_PARTS;
                // blocks of query rows, a row per token and head
                case "mla_flash_attention", "mla_flash_merge" ->
                    (tokens * GLM.heads() + Geometry.FA_QUERIES - 1) / Geometry.FA_QUERIES;
                default -> tokens;
            };
            assertEquals(perToken, d.grid().x(), d.kernel() + " of layer " + d.layer());
            assertTrue(
                    d.threadgroupMemory().length == 0 || d.threadgroupMemory()[0] <= Geometry.MAX_THREADGROUP_MEMORY,
                    d.kernel());
            if (d.kernel().equals("mat_mat")) {
                assertEquals(
                        4 * Geometry.mmMemoryFloats(Geometry.MM_ROWS, Geometry.MM_TOKENS),
                        d.threadgroupMemory()[0],
                        d.kernel() + ": its tile");
            }
            if (d.kernel().startsWith("moe_experts")) {
                assertEquals(
                        4 * Geometry.mmMemoryFloats(Geometry.EXPERT_ROWS, Geometry.EXPERT_TOKENS),
                        d.threadgroupMemory()[0],
                        d.kernel() + ": its tile");
            }
            if (d.kernel().equals("mla_flash_attention")) {
                assertEquals(4 * Geometry.faMemoryFloats(), d.threadgroupMemory()[0], d.kernel());
                // the keys split into at most FA_SPLITS parts, one threadgroup each
                assertEquals(Geometry.FA_SPLITS, d.grid().y(), d.kernel());
            }
        }
        // k_b and v_b: one matrix per head; the experts: one grid slot per expert and one for the shared expert
        Dispatch kb = prompt.dispatches().get(9);
        assertEquals(GLM.heads(), kb.grid().z());
        assertEquals("blk.0.attn_k_b.weight", kb.weightReads().getFirst().tensor());
        Dispatch experts = prompt.dispatches().get(1 + denseLayer.size() + 18);
        assertEquals("moe_experts_gate_up", experts.kernel());

        // the KV cache buffers match by name and size, so the two lists can share them
        for (BufferSpec kv : decode.buffers().stream()
                .filter(b -> b.kind() == BufferSpec.Kind.KV_CACHE)
                .toList()) {
            assertTrue(prompt.buffers().contains(kv), kv.name());
        }
        // StepArgs: token, pos, kv_len, kv_row, slot
        assertEquals(
                tokens * 20L,
                prompt.buffers().get(prompt.buffer(BufferSpec.Kind.STEP)).bytes());
        // per token: x, q (heads x 576), the experts' slots, the attention's parts (FA_SPLITS x heads x 514 floats,
        // 0.16 MB), ...: under 0.6 MB (the decode step's split attention would take 0.33 MB a token for its partials)
        long activations =
                prompt.buffers().get(prompt.buffer(BufferSpec.Kind.ACTIVATIONS)).bytes();
        assertTrue(activations < tokens * 600_000L, activations + " bytes of activations");
        assertThrows(IllegalArgumentException.class, () -> DecodeCommandListBuilder.build(m, 4096, 0));
    }

    /** The prompt tiles read Q4_0 blocks through 16-byte loads: a Q4_0 tensor at an offset that is not a multiple of 16 is refused. */
    @Test
    void misalignedQ4_0TensorsAreRefused() {
        DecodeModel m = fullSizeModel();
        Map<String, WeightTensor> tensors = new HashMap<>(m.tensors());
        WeightTensor q = tensors.get("blk.3.attn_q_b.weight");
        tensors.put(q.name(), new WeightTensor(q.name(), q.type(), q.fileOffset() + 8, q.bytes()));
        IllegalArgumentException e = assertThrows(
                IllegalArgumentException.class,
                () -> DecodeCommandListBuilder.build(new DecodeModel(m.shape(), tensors), 4096));
        assertTrue(
                e.getMessage().contains("blk.3.attn_q_b.weight")
                        && e.getMessage().contains("16-byte aligned"),
                e.getMessage());
    }

    @Test
    void theBatchListGivesEveryRowItsLogitsAndToken() {
        DecodeModel m = fullSizeModel();
        int rows = 4;
        long kvRows = 6L * 4096; // a pool of 6 conversations of 4,096 positions
        CommandList decode = DecodeCommandListBuilder.build(m, kvRows);
        CommandList batch = DecodeCommandListBuilder.batch(m, kvRows, rows);
        assertEquals(rows, batch.tokens());
        assertEquals(rows, batch.outputs());
        assertEquals(1, decode.outputs());
        List<String> kernels = batch.dispatches().stream().map(Dispatch::kernel).toList();
        // the prompt list's attention with every weight multiplied in float (a few tokens would leave the matrix
        // units' tiles mostly empty), the decode step's FFN kernels with a token per grid slice, then each row's
        // output norm, vocabulary projection and two-stage argmax
        List<String> moeLayer = List.of(
                "rms_norm_rows",
                "mat_mat_float",
                "mat_mat_float",
                "rms_norm_rows",
                "mat_mat_float",
                "mla_rope_cache",
                "mat_mat_float",
                "mla_attention",
                "mla_merge_latent",
                "mat_mat_float",
                "mat_mat_float",
                "moe_router",
                "moe_gate_up",
                "moe_down");
        List<String> expected = new ArrayList<>(List.of("embed_row"));
        expected.addAll(moeLayer.stream().filter(k -> !k.equals("moe_router")).toList());
        for (int l = 1; l < GLM.layers(); l++) {
            expected.addAll(moeLayer);
        }
        expected.addAll(List.of("rms_norm_rows", "mat_mat_float", "argmax_parts", "argmax"));
        assertEquals(expected, kernels);
        for (Dispatch d : batch.dispatches()) {
            // the grid dimension that runs over the rows
            int perRow = switch (d.kernel()) {
                case "moe_router", "argmax_parts", "argmax" -> d.grid().y();
                default -> d.grid().x();
            };
            int expectedPerRow = d.kernel().equals("mat_mat_float")
                    ? (rows + Geometry.MM_FLOAT_TOKENS - 1) / Geometry.MM_FLOAT_TOKENS
                    : rows;
            assertEquals(expectedPerRow, perRow, d.kernel() + " of layer " + d.layer());
        }
        assertEquals(rows, batch.dispatches().getLast().grid().y());
        assertEquals(
                Geometry.ARGMAX_PARTS,
                batch.dispatches().get(batch.dispatches().size() - 2).grid().x());
        // the attention of a few sequences splits along the KV length as the decode step does
        Dispatch attention = batch.dispatches().stream()
                .filter(d -> d.kernel().equals("mla_attention"))
                .findFirst()
                .orElseThrow();
        assertEquals(Geometry.ATTENTION_SPLITS / rows, attention.grid().y());
        // logits of every row, then their greedy tokens, inside the activations
        long activations =
                batch.buffers().get(batch.buffer(BufferSpec.Kind.ACTIVATIONS)).bytes();
        assertTrue(batch.logits() + 4L * rows * GLM.vocab() <= activations);
        assertTrue(batch.token() + 4L * rows <= activations);
        // one KV pool shared with the decode step and the prompt list
        for (BufferSpec kv : decode.buffers().stream()
                .filter(b -> b.kind() == BufferSpec.Kind.KV_CACHE)
                .toList()) {
            assertEquals(2L * kvRows * GLM.kvRow(), kv.bytes()); // halves
            assertTrue(batch.buffers().contains(kv), kv.name());
        }
        assertThrows(IllegalArgumentException.class, () -> DecodeCommandListBuilder.batch(m, kvRows, 1));
    }

    @Test
    void batchSizesCoverThePool() {
        assertEquals(List.of(), Geometry.batchSizes(1));
        assertEquals(List.of(2), Geometry.batchSizes(2));
        assertEquals(List.of(2, 4), Geometry.batchSizes(4));
        assertEquals(List.of(2, 4, 8), Geometry.batchSizes(6));
        assertEquals(List.of(2, 4, 8, 16, 32, 64), Geometry.batchSizes(1000));
    }

    @Test
    void refusesModelsTheAttentionKernelCannotHold() {
        ModelShape wide = new ModelShape(
                1, 1, 2048, 40, 768, 512, 192, 64, 256, 10240, 1536, 64, 4, 1536, 154880, 1e-5f, 1e6f, 1f / 16, 2, 1.8f,
                true);
        IllegalArgumentException e = assertThrows(
                IllegalArgumentException.class,
                () -> DecodeCommandListBuilder.build(
                        new DecodeModel(wide, fullSizeModel().tensors()), 16));
        assertTrue(e.getMessage().contains("at most " + Geometry.ATTENTION_MAX_HEADS + " heads"), e.getMessage());
    }

    /** A Q5_K_M file stores attn_k_b (rows of 192) as Q5_1, a format the kernels do not read: refused, not misread. */
    @Test
    void refusesWeightsInAFormatTheKernelsDoNotRead() {
        DecodeModel model = fullSizeModel();
        Map<String, WeightTensor> tensors = new LinkedHashMap<>(model.tensors());
        WeightTensor kb = tensors.get("blk.1.attn_k_b.weight");
        tensors.put(kb.name(), new WeightTensor(kb.name(), 7, kb.fileOffset(), kb.bytes()));
        IllegalArgumentException e = assertThrows(
                IllegalArgumentException.class,
                () -> DecodeCommandListBuilder.build(new DecodeModel(model.shape(), tensors), 16));
        assertTrue(
                e.getMessage().startsWith("blk.1.attn_k_b.weight has ggml type 7, which the kernels do not read"),
                e.getMessage());
    }
}
