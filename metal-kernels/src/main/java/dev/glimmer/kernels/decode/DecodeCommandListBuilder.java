package dev.glimmer.kernels.decode;

import dev.glimmer.kernels.ArgStruct;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.KernelLibrary;
import dev.glimmer.kernels.KernelSignature;
import dev.glimmer.kernels.Size3;
import dev.glimmer.kernels.WeightFormat;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Builds the {@link CommandList} of one decode step (docs/KERNELS.md §2) from a {@link DecodeModel}:
 * per layer 11 dispatches (q_a/kv_a, q_b, RoPE + cache row, k_b absorption, attention, merge, v_b,
 * attn_output + residual, router, gate+up, down + residual; 10 for a dense layer, which has no router),
 * plus the embedding, the output mat-vec and a two-stage argmax. Nothing in it depends on the position or
 * KV length.
 *
 * <p>With more than one token it builds the prompt command list instead, which runs a batch of
 * consecutive tokens (prompt.metal; {@link #promptLayers}): the token is the first grid dimension of the
 * per-token kernels (each token's activations lie at a fixed stride, its position in its own
 * {@code StepArgs}), the weight-heavy steps multiply each dequantized weight chunk with several tokens,
 * the experts run grouped by expert, the attention runs on the matrix units too (mla_flash_attention), and one
 * more dispatch picks the last token's row for the output mat-vec. Each token's row
 * of the KV cache is written before any token's attention reads it, and a token reads only the rows up
 * to its own position, so the batch is causal.
 *
 * <p>The batch decode list ({@link #batch}) is the prompt list's layers with a row per sequence: each row
 * at its own position in its own range of the KV buffers (the KV pool: {@code StepArgs.kv_row}), and every
 * row gets its logits and greedy token. Several conversations then advance by one token each with one read
 * of the dense weights and one read per step of each expert any of them chose.
 *
 * <p>A model with the NextN (MTP) block in its {@link DecodeModel} ({@link #drafts}: a drafting pool's) makes every
 * list compute the block's rows of its positions after the trunk's layers ({@link #nextnInput}, then the block as one
 * more layer with its own KV buffer), and {@link #pool} adds the draft list: the block alone on one token, its head and
 * argmax the draft (docs/SPECULATIVE.md, "On the GPU command lists").
 */
public final class DecodeCommandListBuilder {

    /** Metal binding offsets are 32-bit. */
    static final long MAX_BINDING_OFFSET = (1L << 32) - 1;
    /** Page size of Apple Silicon: weight buffers start on a page of the mapped file. */
    static final long PAGE = 16384;
    /** Alignment of Q4_0 tensors in the file (tiles.metal reads their blocks through 16-byte loads). */
    static final long Q4_0_ALIGNMENT = 16;
    /** Alignment of every argument struct and activation region (constant-buffer offsets must be 256-aligned on some GPUs). */
    static final int ALIGN = 256;
    /**
     * Bytes of one value of the KV cache: the kernels keep it as halves (F16, llama.cpp's default cache type; the
     * attention kernels read {@code half}), 1,152 bytes a row of GLM-4.7-Flash.
     */
    public static final int KV_VALUE_BYTES = 2;

    private static final int MV_THREADS = Geometry.MV_SIMDGROUPS * Geometry.SIMD_WIDTH;
    private static final int WIDE_THREADS = Geometry.WIDE_SIMDGROUPS * Geometry.SIMD_WIDTH;
    private static final int HEAD_THREADS = Geometry.HEAD_SIMDGROUPS * Geometry.SIMD_WIDTH;
    private static final int MM_THREADS = Geometry.MM_SIMDGROUPS * Geometry.SIMD_WIDTH;
    /** ggml's type id of F32 tensors (TYPE_F32 of the kernels). */
    private static final int GGML_F32 = 0;

    private final DecodeModel model;
    private final ModelShape s;
    private final KernelLibrary library;
    private final List<BufferSpec> buffers = new ArrayList<>();
    private final Map<String, Ref> tensorRefs = new HashMap<>();
    private final ByteArrayOutputStream args = new ByteArrayOutputStream();
    private final List<Dispatch> dispatches = new ArrayList<>();
    private final int argsBuffer;
    private final int stepBuffer;
    private final int activationsBuffer;
    private final int[] kvBuffers;
    private final int greedyBuffer;
    /**
     * Whether the model carries the NextN block (its tensors {@code blk.<layers>.*}, in the {@link DecodeModel} only
     * when the pool drafts): every list then also computes the block's rows of its positions (its KV rows, one more
     * KV buffer) from the trunk's outputs, which each sequence keeps in {@link #trunkOutputsBuffer}.
     */
    private final boolean drafting;
    /** Whether this is the draft list: the NextN block alone on one token, its logits and greedy token the draft. */
    private final boolean draft;
    /** The pooled trunk outputs of a drafting pool (-1: none). */
    private final int trunkOutputsBuffer;
    /** Tokens of a run: 1 for the decode step, more for the prompt and batch decode lists. */
    private final int tokens;
    /** Sequences of the KV pool: the greedy tokens kept, one per slot. */
    private final int slots;
    /** Rows that get logits and a greedy token: 1 (the decode step; a prompt's last token) or every row (a batch). */
    private final int outputs;
    /** mla_attention's threadgroups per token. */
    private final int splits;
    /**
     * Whether the attention runs on the matrix units (mla_flash_attention: the prompt list, whose tokens are many
     * query rows over one sequence's keys) rather than as the decode step's split attention (mla_attention and
     * mla_merge_latent: the decode step and the batch decode lists, a query token per sequence).
     */
    private final boolean attentionOnTiles;

    private long activationBytes;
    /** mat_mat's column parts (Geometry.mmParts): per token, room for matMatPartFloats floats. */
    private Ref matMatParts;

    private long matMatPartFloats = 1;
    /** The NextN block's rows (its input, then its output after its layer): the draft list's head reads them. */
    private Ref nextnOutput;

    /** A place in a buffer. */
    private record Ref(int buffer, long offset) {}

    private DecodeCommandListBuilder(
            DecodeModel model,
            long kvRows,
            int slots,
            int tokens,
            boolean everyRow,
            boolean draft,
            KernelLibrary library) {
        this.model = model;
        this.s = model.shape();
        this.library = library;
        this.drafting = drafts(model);
        this.draft = draft;
        if (draft && (!drafting || tokens != 1)) {
            throw new IllegalArgumentException("the draft list runs one token of a model with a NextN block");
        }
        if (tokens < 1) {
            throw new IllegalArgumentException("a command list runs at least one token, not " + tokens);
        }
        if (kvRows < 1 || kvRows * s.kvRow() > 0xFFFF_FFFFL) {
            // the kernels index a KV buffer's values with 32-bit row * kvRow products
            throw new IllegalArgumentException(
                    "a KV buffer holds 1.." + 0xFFFF_FFFFL / s.kvRow() + " rows, not " + kvRows);
        }
        if (slots < 1) {
            throw new IllegalArgumentException("a pool holds at least one sequence, not " + slots);
        }
        this.tokens = tokens;
        this.slots = slots;
        this.outputs = everyRow ? tokens : 1;
        // A batch of sequences at long contexts needs splits along the KV length as the decode step does (the
        // prompt list's attention on tiles splits its keys its own way: Geometry.FA_SPLITS)
        this.splits = tokens == 1
                ? Geometry.ATTENTION_SPLITS
                : Math.max(Geometry.BATCH_MIN_ATTENTION_SPLITS, Geometry.ATTENTION_SPLITS / tokens);
        this.attentionOnTiles = tokens > 1 && !everyRow;
        check();
        placeWeights();
        argsBuffer = add(new BufferSpec("args", BufferSpec.Kind.ARGS, 0, 0));
        stepBuffer = add(new BufferSpec(
                "step",
                BufferSpec.Kind.STEP,
                (long) tokens * library.struct("StepArgs").size(),
                0));
        activationsBuffer = add(new BufferSpec("activations", BufferSpec.Kind.ACTIVATIONS, 0, 0));
        kvBuffers = new int[s.layers() + (drafting ? 1 : 0)];
        for (int l = 0; l < kvBuffers.length; l++) {
            kvBuffers[l] = add(
                    new BufferSpec("kv." + l, BufferSpec.Kind.KV_CACHE, (long) KV_VALUE_BYTES * kvRows * s.kvRow(), 0));
        }
        greedyBuffer = add(new BufferSpec("greedy", BufferSpec.Kind.GREEDY_TOKENS, 4L * slots, 0));
        trunkOutputsBuffer = drafting
                ? add(new BufferSpec(
                        "trunk_outputs",
                        BufferSpec.Kind.TRUNK_OUTPUTS,
                        4L * slots * (Geometry.MAX_DRAFTS + 1) * s.embedding(),
                        0))
                : -1;
    }

    /**
     * Whether {@code model} holds the NextN block's tensors (DecodeModels puts them in for a drafting pool): then the
     * pool's lists compute its rows and {@link #pool} makes the draft list.
     */
    public static boolean drafts(DecodeModel model) {
        return model.has(nextn(model.shape()) + "eh_proj.weight");
    }

    /** The prefix of the NextN block's own tensors: {@code blk.<layers>.nextn.} (its layer's are {@code blk.<layers>.}). */
    private static String nextn(ModelShape s) {
        return "blk." + s.layers() + ".nextn.";
    }

    /** The decode step of {@code model} with KV buffers of {@code kvRows} rows per layer. */
    public static CommandList build(DecodeModel model, long kvRows) {
        return build(model, kvRows, 1);
    }

    /**
     * The command list that runs up to {@code tokens} consecutive tokens of one sequence at once (1: the decode
     * step) and gives the last one's logits; its KV cache buffers have the same names and sizes as the decode
     * step's, so that both can share them. Its KV rows are one sequence's ({@link #pool} makes the lists of several).
     */
    public static CommandList build(DecodeModel model, long kvRows, int tokens) {
        return new DecodeCommandListBuilder(model, kvRows, 1, tokens, false, false, KernelLibrary.load()).build();
    }

    /**
     * The batch decode list: up to {@code rows} tokens, each of its own sequence (position and KV rows from its
     * {@code StepArgs}), each with its own logits and greedy token; KV buffers as {@link #build}'s. Its greedy token
     * buffer holds one sequence's ({@link #pool} makes the lists of several, each with its own).
     */
    public static CommandList batch(DecodeModel model, long kvRows, int rows) {
        if (rows < 2) {
            throw new IllegalArgumentException("a batch decode list runs at least 2 rows, not " + rows);
        }
        return new DecodeCommandListBuilder(model, kvRows, 1, rows, true, false, KernelLibrary.load()).build();
    }

    /**
     * The command lists a pool of {@code slots} sequences over KV buffers of {@code kvRows} rows runs, all binding
     * the same KV buffers: the decode step, the prompt list (batches of {@code promptTokens}; a server's are
     * {@link Geometry#PROMPT_TOKENS}) and a batch decode list per {@link Geometry#batchSizes} (none for one slot), in
     * that order; a model with the NextN block ({@link #drafts}) also batch lists that hold a speculative step's rows
     * (the token and {@link Geometry#MAX_DRAFTS} drafts of one sequence) and, last, the draft list. The one home of that
     * list: the pools make it, and MemoryBudget counts it.
     */
    public static List<CommandList> pool(DecodeModel model, long kvRows, int slots, int promptTokens) {
        KernelLibrary library = KernelLibrary.load();
        boolean drafting = drafts(model);
        List<CommandList> lists = new ArrayList<>();
        lists.add(new DecodeCommandListBuilder(model, kvRows, slots, 1, false, false, library).build());
        lists.add(new DecodeCommandListBuilder(model, kvRows, slots, promptTokens, false, false, library).build());
        for (int rows : Geometry.batchSizes(drafting ? Math.max(slots, Geometry.MAX_DRAFTS + 1) : slots)) {
            lists.add(new DecodeCommandListBuilder(model, kvRows, slots, rows, true, false, library).build());
        }
        if (drafting) {
            lists.add(new DecodeCommandListBuilder(model, kvRows, slots, 1, false, true, library).build());
        }
        return lists;
    }

    private void check() {
        if (s.qLora() == 0) {
            throw new IllegalArgumentException("models without q_lora_rank are not supported by the GPU decode step");
        }
        if (s.heads() > Geometry.ATTENTION_MAX_HEADS || s.kvRow() > Geometry.ATTENTION_MAX_ROW) {
            throw new IllegalArgumentException("the attention kernel holds at most " + Geometry.ATTENTION_MAX_HEADS
                    + " heads and cache rows of " + Geometry.ATTENTION_MAX_ROW + " values; the model has " + s.heads()
                    + " and " + s.kvRow());
        }
        if (attentionOnTiles && (s.latent() > Geometry.FA_MAX_LATENT || s.latent() % 4 != 0 || s.kvRow() % 4 != 0)) {
            throw new IllegalArgumentException("the prompt's attention holds at most " + Geometry.FA_MAX_LATENT
                    + " latent values, in rows of multiples of 4; the model has " + s.latent() + " and rope "
                    + s.rope());
        }
        if (s.experts() > Geometry.ROUTER_MAX_EXPERTS) {
            throw new IllegalArgumentException("the expert selection holds at most " + Geometry.ROUTER_MAX_EXPERTS
                    + " experts; the model has " + s.experts());
        }
        // A K-quant file may hold 32-block fallbacks the kernels do not read (Q5_K_M's attn_k_b is Q5_1).
        for (WeightTensor t : model.tensors().values()) {
            if (WeightFormat.byId(t.type()).isEmpty()) {
                throw new IllegalArgumentException(
                        t.name() + " has ggml type " + t.type() + ", which the kernels do not read" + " (they read "
                                + Arrays.toString(WeightFormat.values()) + ")");
            }
        }
    }

    private int add(BufferSpec b) {
        buffers.add(b);
        return buffers.size() - 1;
    }

    /**
     * Splits the file into weight buffers in file order so that every tensor lies inside one buffer
     * within 4 GiB of its start (binding offsets are 32-bit).
     */
    private void placeWeights() {
        List<WeightTensor> sorted = new ArrayList<>(model.tensors().values());
        sorted.sort(Comparator.comparingLong(WeightTensor::fileOffset));
        int current = -1;
        long start = 0;
        long end = 0;
        for (WeightTensor t : sorted) {
            if (t.type() == WeightFormat.Q4_0.id && t.fileOffset() % Q4_0_ALIGNMENT != 0) {
                // the prompt kernels read Q4_0 blocks in 16-byte loads from 16-byte aligned rows (tiles.metal)
                throw new IllegalArgumentException("tensor " + t.name() + " lies at file offset " + t.fileOffset()
                        + ", not a multiple of " + Q4_0_ALIGNMENT
                        + ": the GPU kernels need Q4_0 tensors 16-byte aligned"
                        + " (GGUF files aligned to 32, the default, have them so)");
            }
            if (current < 0 || t.fileOffset() + t.bytes() - start > MAX_BINDING_OFFSET) {
                if (current >= 0) {
                    buffers.set(
                            current, new BufferSpec("weights." + current, BufferSpec.Kind.WEIGHTS, end - start, start));
                }
                start = t.fileOffset() / PAGE * PAGE;
                end = start;
                current = add(new BufferSpec("weights", BufferSpec.Kind.WEIGHTS, 0, start));
            }
            end = Math.max(end, t.fileOffset() + t.bytes());
            tensorRefs.put(t.name(), new Ref(current, t.fileOffset() - start));
        }
        if (current >= 0) {
            buffers.set(current, new BufferSpec("weights." + current, BufferSpec.Kind.WEIGHTS, end - start, start));
        }
    }

    private Ref weight(String name) {
        Ref r = tensorRefs.get(name);
        if (r == null) {
            throw new IllegalArgumentException("the model has no tensor " + name);
        }
        return r;
    }

    private int type(String name) {
        return model.tensor(name).type();
    }

    private Dispatch.WeightRead all(String name) {
        return new Dispatch.WeightRead(name, model.tensor(name).bytes());
    }

    private Ref args(String struct, Map<String, ? extends Number> values) {
        ArgStruct a = library.struct(struct);
        byte[] b = a.pack(values);
        while (args.size() % ALIGN != 0) {
            args.write(0);
        }
        Ref r = new Ref(argsBuffer, args.size());
        args.writeBytes(b);
        return r;
    }

    /** An activation region with {@code floats} floats per token of the batch. */
    private Ref perToken(long floats) {
        return activation((long) tokens * Math.max(1, floats));
    }

    private Ref activation(long floats) {
        long offset = (activationBytes + ALIGN - 1) / ALIGN * ALIGN;
        activationBytes = offset + 4 * Math.max(1, floats);
        return new Ref(activationsBuffer, offset);
    }

    private static int[] memory(long floats) {
        return new int[] {(int) ((4 * floats + 15) / 16 * 16)};
    }

    private void dispatch(
            String kernel,
            int layer,
            Size3 grid,
            int threads,
            int[] memory,
            List<Dispatch.WeightRead> reads,
            Ref... bindings) {
        dispatch(kernel, layer, grid, threads, memory, reads, 0, bindings);
    }

    /** A dispatch that multiplies weight matrices: {@code multiplyAdds} with a token in every row (Dispatch). */
    private void dispatch(
            String kernel,
            int layer,
            Size3 grid,
            int threads,
            int[] memory,
            List<Dispatch.WeightRead> reads,
            long multiplyAdds,
            Ref... bindings) {
        KernelSignature k = library.kernel(kernel);
        if (bindings.length != k.bufferCount()) {
            throw new IllegalStateException(kernel + " binds " + k.bufferCount() + " buffers, got " + bindings.length);
        }
        List<Dispatch.Binding> list = new ArrayList<>();
        for (int i = 0; i < bindings.length; i++) {
            list.add(new Dispatch.Binding(i, bindings[i].buffer(), bindings[i].offset()));
        }
        dispatches.add(new Dispatch(
                kernel, layer, list, grid, Size3.of(threads), memory, !dispatches.isEmpty(), reads, multiplyAdds));
    }

    /** {@code n} rounded up to a multiple of 4 (the kernels' align4: threadgroup arrays read as float4). */
    private static int align4(int n) {
        return (n + 3) / 4 * 4;
    }

    private static int groups(int rows, int perGroup) {
        return (rows + perGroup - 1) / perGroup;
    }

    private CommandList build() {
        Ref step = new Ref(stepBuffer, 0);
        Ref greedy = new Ref(greedyBuffer, 0);
        Ref x = perToken(s.embedding());
        String embd = "token_embd.weight";
        if (!draft) {
            embed(embd, step, x);
        }
        if (tokens == 1) {
            decodeLayers(step, x);
        } else {
            promptLayers(step, x);
        }
        Ref logits = activation((long) outputs * s.vocab());
        Ref token = activation(outputs);
        String out = model.has("output.weight") ? "output.weight" : embd;
        String outNorm = "output_norm.weight";
        if (draft) {
            // the block's own head where the file has one (docs/MODEL.md §4b), on the block's output
            x = nextnOutput;
            out = model.has(nextn(s) + "shared_head_head.weight") ? nextn(s) + "shared_head_head.weight" : out;
            outNorm = model.has(nextn(s) + "shared_head_norm.weight") ? nextn(s) + "shared_head_norm.weight" : outNorm;
        }
        if (outputs > 1) {
            // every row of the batch: output norm, the vocabulary projection as mat_mat
            Ref xn = perToken(s.embedding());
            normRows(-1, outNorm, s.embedding(), x, xn);
            matMat(-1, out, s.embedding(), s.vocab(), xn, logits, false);
        } else {
            Ref last = x;
            if (tokens > 1) {
                last = activation(s.embedding());
                dispatch(
                        "last_row",
                        -1,
                        Size3.of(1),
                        WIDE_THREADS,
                        new int[0],
                        List.of(),
                        args("LastRowArgs", Map.of("tokens", tokens, "cols", s.embedding())),
                        step,
                        x,
                        last);
            }
            matVec(-1, out, s.embedding(), s.vocab(), last, logits, weight(outNorm), null);
            dispatches.set(dispatches.size() - 1, withRead(dispatches.getLast(), all(outNorm)));
        }
        Ref bestValues = activation((long) outputs * Geometry.ARGMAX_PARTS);
        Ref bestIndices = activation((long) outputs * Geometry.ARGMAX_PARTS);
        Ref argmaxArgs = args("ArgmaxArgs", Map.of("n", s.vocab(), "parts", Geometry.ARGMAX_PARTS));
        dispatch(
                "argmax_parts",
                -1,
                Size3.of(Geometry.ARGMAX_PARTS, outputs),
                WIDE_THREADS,
                memory(2L * Geometry.WIDE_SIMDGROUPS),
                List.of(),
                argmaxArgs,
                logits,
                bestValues,
                bestIndices);
        dispatch(
                "argmax",
                -1,
                Size3.of(1, outputs),
                WIDE_THREADS,
                memory(2L * Geometry.WIDE_SIMDGROUPS),
                List.of(),
                argmaxArgs,
                bestValues,
                bestIndices,
                token,
                step,
                greedy);

        List<BufferSpec> finalBuffers = new ArrayList<>(buffers);
        finalBuffers.set(argsBuffer, new BufferSpec("args", BufferSpec.Kind.ARGS, args.size(), 0));
        finalBuffers.set(
                activationsBuffer, new BufferSpec("activations", BufferSpec.Kind.ACTIVATIONS, activationBytes, 0));
        return new CommandList(
                finalBuffers, args.toByteArray(), dispatches, logits.offset(), token.offset(), tokens, outputs);
    }

    /** x[t] = row steps[t].token of the embedding table {@code table} (embed_row). */
    private void embed(String table, Ref step, Ref x) {
        dispatch(
                "embed_row",
                -1,
                Size3.of(tokens, 1),
                WIDE_THREADS,
                new int[0],
                List.of(new Dispatch.WeightRead(
                        table, (long) tokens * model.tensor(table).bytes() / s.vocab())),
                args("EmbedArgs", Map.of("type", type(table), "cols", s.embedding())),
                step,
                weight(table),
                x,
                new Ref(greedyBuffer, 0));
    }

    /**
     * The NextN block's input rows (docs/MODEL.md §4b): each token's embedding and the trunk's output at the position
     * before it ({@code trunk}, the final hidden state of the trunk's layers, normed here as the output head norms it;
     * the draft list's one row reads the output its sequence kept), both RMS-normed, through eh_proj. The trunk's
     * lists keep each sequence's last outputs for the runs after. Returns the block's input x.
     */
    private Ref nextnInput(Ref step, Ref trunk) {
        int e = s.embedding();
        int l = s.layers();
        String table =
                model.has(nextn(s) + "embed_tokens.weight") ? nextn(s) + "embed_tokens.weight" : "token_embd.weight";
        Ref emb = perToken(e);
        embed(table, step, emb);
        Ref outputs = emb; // unread by the draft list's row, which takes its sequence's kept output
        if (!draft) {
            outputs = perToken(e);
            normRows(l, "output_norm.weight", e, trunk, outputs);
        }
        Ref kept = new Ref(trunkOutputsBuffer, 0);
        Map<String, Number> a = Map.of("cols", e, "eps", s.eps(), "ring", Geometry.MAX_DRAFTS + 1, "tokens", tokens);
        Ref inputArgs = args("NextnInputArgs", a);
        Ref input = perToken(2L * e);
        dispatch(
                "nextn_input",
                l,
                Size3.of(tokens),
                WIDE_THREADS,
                memory(Geometry.WIDE_SIMDGROUPS),
                List.of(all(nextn(s) + "enorm.weight"), all(nextn(s) + "hnorm.weight")),
                inputArgs,
                step,
                emb,
                outputs,
                kept,
                weight(nextn(s) + "enorm.weight"),
                weight(nextn(s) + "hnorm.weight"),
                input);
        if (!draft) {
            dispatch(
                    "keep_outputs",
                    l,
                    Size3.of(tokens),
                    WIDE_THREADS,
                    new int[0],
                    List.of(),
                    inputArgs,
                    step,
                    outputs,
                    kept);
        }
        nextnOutput = perToken(e);
        String proj = nextn(s) + "eh_proj.weight";
        if (tokens == 1) {
            matVec(l, proj, 2 * e, e, input, nextnOutput, null, null);
        } else {
            matMat(l, proj, 2 * e, e, input, nextnOutput, false);
        }
        return nextnOutput;
    }

    /**
     * The activation regions, a row per token, that the decode step's layers and the prompt list's share: the
     * attention's (q_a, kv_a, q_b's output, q, the splits' partials, the merged latents, o) and the FFN's (router
     * logits, chosen experts and weights, and act: a slot of actStride floats per routed expert and the shared one).
     */
    private record Regions(
            Ref qa,
            Ref kv,
            Ref qFull,
            Ref q,
            Ref partials,
            Ref latent,
            Ref o,
            Ref routerLogits,
            Ref ids,
            Ref expertWeights,
            Ref act,
            int actStride) {}

    private Regions regions() {
        int actStride = Math.max(Math.max(s.expertFfn(), s.sharedFfn()), s.denseFfn());
        return new Regions(
                perToken(s.qLora()),
                perToken(s.kvRow()),
                perToken((long) s.heads() * (s.nope() + s.rope())),
                perToken((long) s.heads() * s.kvRow()),
                perToken((long) (attentionOnTiles ? Geometry.FA_SPLITS : splits) * s.heads() * (s.latent() + 2)),
                perToken((long) s.heads() * s.latent()),
                perToken((long) s.heads() * s.vHead()),
                perToken(s.experts()),
                perToken(s.expertsUsed()),
                perToken(s.expertsUsed()),
                perToken((long) (s.expertsUsed() + 1) * actStride),
                actStride);
    }

    /** The layers of the decode step, 11 dispatches each (10 for a dense FFN): see the class comment. */
    private void decodeLayers(Ref step, Ref x) {
        int perHead = s.nope() + s.rope();
        Regions r = regions();
        for (int l = draft ? s.layers() : 0; l < kvBuffers.length; l++) {
            if (l == s.layers()) {
                x = nextnInput(step, x); // the NextN block's row of each position, after the trunk's layers
            }
            String b = "blk." + l + ".";
            Ref cache = new Ref(kvBuffers[l], 0);
            // 1. attn_norm + q_a and kv_a
            int pairSplit = Geometry.mvSplit(s.qLora() + s.kvRow());
            int perGroup = Geometry.mvRowsPerThreadgroup(pairSplit);
            dispatch(
                    "mat_vec_pair",
                    l,
                    Size3.of(groups(s.qLora(), perGroup) + groups(s.kvRow(), perGroup)),
                    MV_THREADS,
                    memory(Geometry.MV_SCRATCH_FLOATS),
                    List.of(all(b + "attn_norm.weight"), all(b + "attn_q_a.weight"), all(b + "attn_kv_a_mqa.weight")),
                    (long) s.embedding() * (s.qLora() + s.kvRow()),
                    args(
                            "MatVecPairArgs",
                            Map.of(
                                    "cols",
                                    s.embedding(),
                                    "type1",
                                    type(b + "attn_q_a.weight"),
                                    "rows1",
                                    s.qLora(),
                                    "type2",
                                    type(b + "attn_kv_a_mqa.weight"),
                                    "rows2",
                                    s.kvRow(),
                                    "eps",
                                    s.eps(),
                                    "split",
                                    pairSplit)),
                    x,
                    weight(b + "attn_norm.weight"),
                    weight(b + "attn_q_a.weight"),
                    r.qa(),
                    weight(b + "attn_kv_a_mqa.weight"),
                    r.kv());
            // 2. q_a_norm + q_b
            matVec(
                    l,
                    b + "attn_q_b.weight",
                    s.qLora(),
                    s.heads() * perHead,
                    r.qa(),
                    r.qFull(),
                    weight(b + "attn_q_a_norm.weight"),
                    null);
            dispatches.set(dispatches.size() - 1, withRead(dispatches.getLast(), all(b + "attn_q_a_norm.weight")));
            // 3. RoPE on q_pe; the cache row
            ropeCache(l, b, step, r.qFull(), r.kv(), r.q(), cache);
            // 4. q_nope of each head absorbed through its k_b
            headMatVec(l, b + "attn_k_b.weight", s.nope(), s.latent(), r.qFull(), perHead, r.q(), s.kvRow());
            // 5. attention over the cache, split along the KV length
            attention(l, step, r.q(), cache, r.partials());
            // 6. merge of the splits, then v_b of each head
            mergeLatent(l, step, r.partials(), r.latent());
            headMatVec(l, b + "attn_v_b.weight", s.latent(), s.vHead(), r.latent(), s.latent(), r.o(), s.vHead());
            // 7. attn_output + residual
            matVec(l, b + "attn_output.weight", s.heads() * s.vHead(), s.embedding(), r.o(), x, null, x);
            // 8-11. the FFN
            if (l < s.denseLayers()) {
                denseFfn(l, b, step, x, r.routerLogits(), r.act(), r.ids(), r.expertWeights(), r.actStride());
            } else {
                moe(l, b, step, x, r.routerLogits(), r.act(), r.ids(), r.expertWeights(), r.actStride());
            }
        }
    }

    /**
     * The layers of the prompt command list: the weight-heavy steps through mat_mat, which multiplies tiles of
     * dequantized weights with several tokens' activations on the matrix units, and the experts grouped by expert (moe_route
     * lists each expert's tokens); the norms, RoPE with the cache rows, the attention merge and the weighted
     * sum of the experts as small per-token kernels. Per MoE layer: attn_norm, q_a, kv_a, q_a_norm, q_b, RoPE
     * + cache rows, k_b, attention, merge, v_b, attn_output + residual, ffn_norm, router, routing, gate+up,
     * down, weighted sum + residual.
     */
    private void promptLayers(Ref step, Ref x) {
        int perHead = s.nope() + s.rope();
        int slots = s.expertsUsed() + 1;
        Regions r = regions();
        Ref xn = perToken(s.embedding());
        Ref qaNormed = perToken(s.qLora());
        Ref routes = activation((long) Math.max(1, s.experts()) * tokens);
        Ref counts = activation(Math.max(1, s.experts()));
        Ref blocks = activation(Math.max(1, routedBlocks(s.expertsUsed(), s.experts())));
        Ref ffnOut = perToken((long) slots * s.embedding());
        if (outputs == 1) {
            // the column parts of the single matrices mat_mat multiplies (a batch of sequences multiplies in float):
            // room for the largest, the router's too in case it is not F32
            for (int[] colsRows : new int[][] {
                {s.embedding(), s.qLora()},
                {s.embedding(), s.kvRow()},
                {s.qLora(), s.heads() * perHead},
                {s.heads() * s.vHead(), s.embedding()},
                {s.embedding(), s.experts()},
                {2 * s.embedding(), s.embedding()}
            }) {
                matMatPartFloats = Math.max(
                        matMatPartFloats, (long) Geometry.mmParts(tokens, colsRows[1], colsRows[0]) * colsRows[1]);
            }
            matMatParts = perToken(matMatPartFloats);
        }
        for (int l = 0; l < kvBuffers.length; l++) {
            if (l == s.layers()) {
                x = nextnInput(step, x); // the NextN block's rows of the run's positions, after the trunk's layers
            }
            String b = "blk." + l + ".";
            Ref cache = new Ref(kvBuffers[l], 0);
            normRows(l, b + "attn_norm.weight", s.embedding(), x, xn);
            matMat(l, b + "attn_q_a.weight", s.embedding(), s.qLora(), xn, r.qa(), false);
            matMat(l, b + "attn_kv_a_mqa.weight", s.embedding(), s.kvRow(), xn, r.kv(), false);
            normRows(l, b + "attn_q_a_norm.weight", s.qLora(), r.qa(), qaNormed);
            matMat(l, b + "attn_q_b.weight", s.qLora(), s.heads() * perHead, qaNormed, r.qFull(), false);
            ropeCache(l, b, step, r.qFull(), r.kv(), r.q(), cache);
            // q_nope of each head absorbed through its k_b: one matrix per head (grid z)
            headMatMat(l, b + "attn_k_b.weight", s.nope(), s.latent(), r.qFull(), perHead, r.q(), s.kvRow());
            if (attentionOnTiles) {
                flashAttention(l, step, r.q(), cache, r.partials(), r.latent());
            } else {
                attention(l, step, r.q(), cache, r.partials());
                mergeLatent(l, step, r.partials(), r.latent());
            }
            headMatMat(l, b + "attn_v_b.weight", s.latent(), s.vHead(), r.latent(), s.latent(), r.o(), s.vHead());
            matMat(l, b + "attn_output.weight", s.heads() * s.vHead(), s.embedding(), r.o(), x, true);
            if (outputs > 1) {
                // a batch of sequences: each token's experts through the decode step's FFN kernels, a token per
                // grid slice (grouping by expert pays only when many tokens share experts)
                if (l < s.denseLayers()) {
                    denseFfn(l, b, step, x, r.routerLogits(), r.act(), r.ids(), r.expertWeights(), r.actStride());
                } else {
                    moe(l, b, step, x, r.routerLogits(), r.act(), r.ids(), r.expertWeights(), r.actStride());
                }
                continue;
            }
            normRows(l, b + "ffn_norm.weight", s.embedding(), x, xn);
            if (l < s.denseLayers()) {
                String gate = b + "ffn_gate.weight";
                String up = b + "ffn_up.weight";
                String down = b + "ffn_down.weight";
                // the dense FFN in the shared expert's slot, with no routed slots
                expertsPrompt(
                        l,
                        0,
                        new FfnTensors(gate, up, down, gate, up, down),
                        s.denseFfn(),
                        xn,
                        r.act(),
                        ffnOut,
                        routes,
                        counts,
                        blocks,
                        r.expertWeights(),
                        x,
                        r.actStride());
            } else {
                String router = b + "ffn_gate_inp.weight";
                String bias = b + "exp_probs_b.bias";
                boolean hasBias = model.has(bias);
                matMat(l, router, s.embedding(), s.experts(), xn, r.routerLogits(), false);
                FfnTensors t = moeTensors(b);
                Ref routeArgs = args(
                        "GateUpArgs",
                        gateUpArgs(s.expertsUsed(), s.sharedFfn(), t, hasBias ? bias : null, r.actStride(), 1));
                // each token's experts, then each expert's list of tokens (a threadgroup per expert)
                dispatch(
                        "moe_select",
                        l,
                        Size3.of(groups(tokens, Geometry.WIDE_SIMDGROUPS)),
                        WIDE_THREADS,
                        new int[0],
                        hasBias ? List.of(all(bias)) : List.of(),
                        routeArgs,
                        r.routerLogits(),
                        hasBias ? weight(bias) : r.routerLogits(),
                        r.ids(),
                        r.expertWeights(),
                        step);
                dispatch(
                        "moe_route",
                        l,
                        Size3.of(s.experts()),
                        HEAD_THREADS,
                        memory((long) tokens * s.expertsUsed() + HEAD_THREADS + Geometry.HEAD_SIMDGROUPS + s.experts()),
                        List.of(),
                        routeArgs,
                        r.ids(),
                        routes,
                        counts,
                        blocks);
                expertsPrompt(
                        l,
                        s.expertsUsed(),
                        t,
                        s.sharedFfn(),
                        xn,
                        r.act(),
                        ffnOut,
                        routes,
                        counts,
                        blocks,
                        r.expertWeights(),
                        x,
                        r.actStride());
            }
        }
    }

    /**
     * Blocks of {@link Geometry#EXPERT_TOKENS} entries that {@code routed} slots of a batch fill in the experts' token
     * lists at most (prompt.metal's routed_blocks: the two must agree).
     */
    private int routedBlocks(int routed, int experts) {
        return routed > 0 ? groups(tokens * routed, Geometry.EXPERT_TOKENS) + experts : 0;
    }

    /** y[t] = rms-normalized x[t] * the norm weight {@code norm}, rows of {@code cols} values. */
    private void normRows(int layer, String norm, int cols, Ref x, Ref y) {
        dispatch(
                "rms_norm_rows",
                layer,
                Size3.of(tokens),
                WIDE_THREADS,
                memory(Geometry.WIDE_SIMDGROUPS),
                List.of(all(norm)),
                args("NormArgs", Map.of("cols", cols, "eps", s.eps())),
                x,
                weight(norm),
                y,
                new Ref(stepBuffer, 0));
    }

    /** y[t] = W x[t] (+ y[t] with {@code add}) for a batch; x and y rows of cols and rows values. */
    private void matMat(int layer, String w, int cols, int rows, Ref x, Ref y, boolean add) {
        matMat(layer, w, cols, rows, 1, 0, x, cols, 0, y, rows, 0, add);
    }

    /**
     * Per head h (grid z): y[t][h] = W[h] x[t][h] for a stacked per-head weight (k_b, v_b), x rows of
     * {@code xPerHead} floats per head (the first cols used), y rows of {@code yPerHead} per head (the first rows written).
     */
    private void headMatMat(int layer, String w, int cols, int rows, Ref x, int xPerHead, Ref y, int yPerHead) {
        matMat(
                layer,
                w,
                cols,
                rows,
                s.heads(),
                model.tensor(w).bytes() / s.heads(),
                x,
                s.heads() * xPerHead,
                xPerHead,
                y,
                s.heads() * yPerHead,
                yPerHead,
                false);
    }

    private void matMat(
            int layer,
            String w,
            int cols,
            int rows,
            int matrices,
            long wStep,
            Ref x,
            int xStride,
            int xStep,
            Ref y,
            int yStride,
            int yStep,
            boolean add) {
        Map<String, Number> a = new LinkedHashMap<>();
        a.put("type", type(w));
        a.put("cols", cols);
        a.put("rows", rows);
        a.put("tokens", tokens);
        a.put("x_stride", xStride);
        a.put("y_stride", yStride);
        a.put("w_step", wStep);
        a.put("x_step", xStep);
        a.put("y_step", yStep);
        a.put("add", add ? 1 : 0);
        a.put("parts", 1);
        Ref step = new Ref(stepBuffer, 0);
        long multiplyAdds = (long) rows * cols * matrices * tokens;
        if (type(w) == GGML_F32 || outputs > 1) {
            // F32 weights (the router) in float: the matrix units' halves could make it pick other experts; and a
            // batch of a few sequences' tokens, which would leave the tiles mostly empty. Few rows split their
            // columns over SIMD-groups, as the decode step's mat-vec does.
            int split = Math.min(Geometry.mvSplit((long) rows * matrices), Geometry.MM_SIMDGROUPS);
            a.put("split", split);
            dispatch(
                    "mat_mat_float",
                    layer,
                    new Size3(
                            groups(tokens, Geometry.MM_FLOAT_TOKENS),
                            groups(rows, Geometry.mmFloatRowsPerThreadgroup(split)),
                            matrices),
                    MM_THREADS,
                    memory(Geometry.MM_FLOAT_PARTIALS),
                    List.of(all(w)),
                    multiplyAdds,
                    args("MatMatArgs", a),
                    weight(w),
                    x,
                    y,
                    step);
        } else {
            // a single matrix of few rows: its columns in parts, a threadgroup each, added up by mat_mat_parts
            int parts = matrices == 1 ? Geometry.mmParts(tokens, rows, cols) : 1;
            a.put("split", 1);
            a.put("parts", parts);
            if (parts > 1 && (matMatParts == null || (long) parts * rows > matMatPartFloats)) {
                throw new IllegalStateException(w + ": no room for " + parts + " column parts of " + rows + " rows");
            }
            Ref partials = parts > 1 ? matMatParts : y; // unread with one part
            Ref matArgs = args("MatMatArgs", a);
            dispatch(
                    "mat_mat",
                    layer,
                    new Size3(groups(tokens, Geometry.MM_TOKENS) * parts, groups(rows, Geometry.MM_ROWS), matrices),
                    MM_THREADS,
                    memory(Geometry.mmMemoryFloats(Geometry.MM_ROWS, Geometry.MM_TOKENS)),
                    List.of(all(w)),
                    multiplyAdds,
                    matArgs,
                    weight(w),
                    x,
                    y,
                    step,
                    partials);
            if (parts > 1) {
                dispatch(
                        "mat_mat_parts",
                        layer,
                        new Size3(tokens, groups(rows, WIDE_THREADS), matrices),
                        WIDE_THREADS,
                        new int[0],
                        List.of(),
                        matArgs,
                        partials,
                        y,
                        step);
            }
        }
    }

    /**
     * The FFN of a prompt batch, grouped by expert: gate+up and down over {@code routed} slots of the stacked
     * tensors (each expert's token list from moe_route) and the shared expert (or, with {@code routed} 0, the
     * dense FFN) of {@code sharedWidth}, then the weighted sum added to x.
     */
    private void expertsPrompt(
            int l,
            int routed,
            FfnTensors t,
            int sharedWidth,
            Ref xn,
            Ref act,
            Ref ffnOut,
            Ref routes,
            Ref counts,
            Ref blocks,
            Ref expertWeights,
            Ref x,
            int actStride) {
        int experts = routed > 0 ? s.experts() : 0;
        int blockColumns =
                routedBlocks(routed, experts) + (sharedWidth > 0 ? groups(tokens, Geometry.EXPERT_TOKENS) : 0);
        int rows = Math.max(routed > 0 ? s.expertFfn() : 0, sharedWidth);
        Ref step = new Ref(stepBuffer, 0);
        List<Dispatch.WeightRead> gateUpReads = new ArrayList<>(List.of(all(t.gate()), all(t.up())));
        List<Dispatch.WeightRead> downReads = new ArrayList<>(List.of(all(t.down())));
        if (routed > 0 && sharedWidth > 0) {
            gateUpReads.addAll(List.of(all(t.gateShared()), all(t.upShared())));
            downReads.add(all(t.downShared()));
        }
        // a tile holds gate rows in its upper half and the same up rows in its lower half
        int[] tile = memory(Geometry.mmMemoryFloats(Geometry.EXPERT_ROWS, Geometry.EXPERT_TOKENS));
        dispatch(
                "moe_experts_gate_up",
                l,
                Size3.of(blockColumns, groups(rows, Geometry.EXPERT_ROWS / 2)),
                MM_THREADS,
                tile,
                gateUpReads,
                2 * ffnMultiplyAdds(routed, sharedWidth),
                args("GateUpArgs", gateUpArgs(routed, sharedWidth, t, null, actStride, 1)),
                xn,
                weight(t.gate()),
                weight(t.up()),
                weight(t.gateShared()),
                weight(t.upShared()),
                routes,
                counts,
                blocks,
                act,
                step);
        dispatch(
                "moe_experts_down",
                l,
                Size3.of(blockColumns, groups(s.embedding(), Geometry.EXPERT_ROWS)),
                MM_THREADS,
                tile,
                downReads,
                ffnMultiplyAdds(routed, sharedWidth),
                args("DownArgs", downArgs(routed, t, sharedWidth, actStride, 1)),
                weight(t.down()),
                weight(t.downShared()),
                act,
                routes,
                counts,
                blocks,
                ffnOut,
                step);
        dispatch(
                "moe_combine",
                l,
                Size3.of(tokens, groups(s.embedding(), WIDE_THREADS)),
                WIDE_THREADS,
                new int[0],
                List.of(),
                args("CombineArgs", Map.of("rows", s.embedding(), "routed", routed, "shared", sharedWidth > 0 ? 1 : 0)),
                ffnOut,
                expertWeights,
                x,
                step);
    }

    /**
     * Multiply-adds of one of an FFN's matrices (gate, up or down) in a run: per token, the rows of its {@code routed}
     * experts and the shared expert's (or the dense FFN's) {@code sharedWidth}, each with the hidden size.
     */
    private long ffnMultiplyAdds(int routed, int sharedWidth) {
        return (long) tokens * s.embedding() * ((long) routed * s.expertFfn() + sharedWidth);
    }

    /** RoPE on each token's q_pe (q_full to q) and each token's cache row (mla_rope_cache). */
    private void ropeCache(int l, String b, Ref step, Ref qFull, Ref kv, Ref q, Ref cache) {
        dispatch(
                "mla_rope_cache",
                l,
                Size3.of(tokens, s.heads() + 1),
                WIDE_THREADS,
                memory(Geometry.WIDE_SIMDGROUPS + align4(s.kvRow())),
                List.of(all(b + "attn_kv_a_norm.weight")),
                args(
                        "RopeCacheArgs",
                        Map.of(
                                "heads",
                                s.heads(),
                                "nope",
                                s.nope(),
                                "rope",
                                s.rope(),
                                "latent",
                                s.latent(),
                                "eps",
                                s.eps(),
                                "rope_base",
                                s.ropeBase())),
                step,
                qFull,
                kv,
                weight(b + "attn_kv_a_norm.weight"),
                q,
                cache);
    }

    /** Each token's attention over the cache in {@link #splits} partials (mla_attention). */
    private void attention(int l, Ref step, Ref q, Ref cache, Ref partials) {
        dispatch(
                "mla_attention",
                l,
                Size3.of(tokens, splits),
                WIDE_THREADS,
                new int[0],
                List.of(),
                args(
                        "AttentionArgs",
                        Map.of(
                                "heads",
                                s.heads(),
                                "latent",
                                s.latent(),
                                "rope",
                                s.rope(),
                                "splits",
                                splits,
                                "scale",
                                s.kqScale())),
                step,
                q,
                cache,
                partials);
    }

    /**
     * Each token's and head's latent attention output, on the matrix units (mla_flash_attention). Its multiply-adds
     * are those of a batch at the start of a sequence: query row (t, h) scores t + 1 keys over the cache row's values
     * and sums as many latent rows (a batch after a cached prefix does more, per token as many more as the prefix).
     */
    private void flashAttention(int l, Ref step, Ref q, Ref cache, Ref partials, Ref latent) {
        int queries = tokens * s.heads();
        long multiplyAdds = (long) tokens * (tokens + 1) / 2 * s.heads() * (s.kvRow() + s.latent());
        Ref flashArgs = args(
                "FlashAttentionArgs",
                Map.of(
                        "heads",
                        s.heads(),
                        "latent",
                        s.latent(),
                        "rope",
                        s.rope(),
                        "tokens",
                        tokens,
                        "scale",
                        s.kqScale()));
        dispatch(
                "mla_flash_attention",
                l,
                new Size3(groups(queries, Geometry.FA_QUERIES), Geometry.FA_SPLITS, 1),
                Geometry.FA_SIMDGROUPS * Geometry.SIMD_WIDTH,
                memory(Geometry.faMemoryFloats()),
                List.of(),
                multiplyAdds,
                flashArgs,
                step,
                q,
                cache,
                latent,
                partials);
        // the rows whose keys were split: their parts merged
        dispatch(
                "mla_flash_merge",
                l,
                new Size3(groups(queries, Geometry.FA_QUERIES), Geometry.FA_QUERIES / Geometry.WIDE_SIMDGROUPS, 1),
                WIDE_THREADS,
                new int[0],
                List.of(),
                flashArgs,
                step,
                partials,
                latent);
    }

    /** Each token's and head's latent attention output merged from its partials (mla_merge_latent). */
    private void mergeLatent(int l, Ref step, Ref partials, Ref latent) {
        // a step of one or a few sequences splits each head
        int parts = Math.max(1, Geometry.MERGE_PARTS / tokens);
        dispatch(
                "mla_merge_latent",
                l,
                new Size3(tokens, s.heads(), parts),
                WIDE_THREADS,
                memory((long) WIDE_THREADS + Geometry.WIDE_SIMDGROUPS + splits),
                List.of(),
                args("MergeArgs", Map.of("heads", s.heads(), "latent", s.latent(), "splits", splits, "parts", parts)),
                step,
                partials,
                latent);
    }

    private static Dispatch withRead(Dispatch d, Dispatch.WeightRead read) {
        List<Dispatch.WeightRead> reads = new ArrayList<>(d.weightReads());
        reads.add(read);
        return new Dispatch(
                d.kernel(),
                d.layer(),
                d.bindings(),
                d.grid(),
                d.threads(),
                d.threadgroupMemory(),
                d.barrier(),
                reads,
                d.multiplyAdds());
    }

    /** y = W x (+ residual), x optionally RMS-normalized with {@code norm}; y == residual for the in-place residual add. */
    private void matVec(int layer, String w, int cols, int rows, Ref x, Ref y, Ref norm, Ref residual) {
        matVec(layer, w, cols, rows, 1, 0, x, 0, y != null ? y : residual, 0, norm, residual);
    }

    /**
     * Per head h: y[h] = W[h] x[h] for a stacked per-head weight (k_b, v_b), x of {@code xPerHead} floats per head
     * (the first cols used), y of {@code yPerHead} per head (the first rows written): mat_vec's grid y.
     */
    private void headMatVec(int layer, String w, int cols, int rows, Ref x, int xPerHead, Ref y, int yPerHead) {
        matVec(
                layer,
                w,
                cols,
                rows,
                s.heads(),
                model.tensor(w).bytes() / s.heads(),
                x,
                xPerHead,
                y,
                yPerHead,
                null,
                null);
    }

    private void matVec(
            int layer,
            String w,
            int cols,
            int rows,
            int matrices,
            long wStep,
            Ref x,
            int xStep,
            Ref out,
            int yStep,
            Ref norm,
            Ref residual) {
        Map<String, Number> a = new LinkedHashMap<>();
        a.put("type", type(w));
        a.put("cols", cols);
        a.put("rows", rows);
        a.put("norm", norm != null ? 1 : 0);
        a.put("add", residual != null ? 1 : 0);
        a.put("eps", s.eps());
        int split = Geometry.mvSplit((long) rows * matrices);
        a.put("split", split);
        a.put("w_step", wStep);
        a.put("x_step", xStep);
        a.put("y_step", yStep);
        dispatch(
                "mat_vec",
                layer,
                Size3.of(groups(rows, Geometry.mvRowsPerThreadgroup(split)), matrices),
                MV_THREADS,
                memory(Geometry.MV_SCRATCH_FLOATS),
                List.of(all(w)),
                (long) rows * cols * matrices,
                args("MatVecArgs", a),
                weight(w),
                x,
                out,
                norm != null ? norm : x,
                residual != null ? residual : out);
    }

    private void denseFfn(
            int l, String b, Ref step, Ref x, Ref logits, Ref act, Ref ids, Ref expertWeights, int actStride) {
        String gate = b + "ffn_gate.weight";
        String up = b + "ffn_up.weight";
        String down = b + "ffn_down.weight";
        FfnTensors t = new FfnTensors(gate, up, down, gate, up, down); // the FFN in the shared expert's slot
        gateUp(
                l,
                b,
                step,
                x,
                logits,
                null,
                act,
                ids,
                expertWeights,
                actStride,
                0,
                s.denseFfn(),
                t,
                List.of(all(b + "ffn_norm.weight"), all(gate), all(up)));
        down(l, step, x, act, ids, expertWeights, actStride, 0, t, s.denseFfn(), List.of(all(down)));
    }

    private void moe(int l, String b, Ref step, Ref x, Ref logits, Ref act, Ref ids, Ref expertWeights, int actStride) {
        String router = b + "ffn_gate_inp.weight";
        String bias = b + "exp_probs_b.bias";
        boolean hasBias = model.has(bias);
        int routerSplit = Geometry.mvSplit(s.experts());
        dispatch(
                "moe_router",
                l,
                Size3.of(groups(s.experts(), Geometry.mvRowsPerThreadgroup(routerSplit)), tokens),
                MV_THREADS,
                memory(Geometry.MV_SCRATCH_FLOATS),
                List.of(all(b + "ffn_norm.weight"), all(router)),
                (long) tokens * s.experts() * s.embedding(),
                args(
                        "RouterArgs",
                        Map.of(
                                "type",
                                type(router),
                                "cols",
                                s.embedding(),
                                "experts",
                                s.experts(),
                                "eps",
                                s.eps(),
                                "split",
                                routerSplit)),
                weight(router),
                x,
                weight(b + "ffn_norm.weight"),
                logits,
                step);

        FfnTensors t = moeTensors(b);
        List<Dispatch.WeightRead> gateUpReads =
                new ArrayList<>(List.of(all(b + "ffn_norm.weight"), used(t.gate()), used(t.up())));
        if (hasBias) {
            gateUpReads.add(all(bias));
        }
        List<Dispatch.WeightRead> downReads = new ArrayList<>(List.of(used(t.down())));
        if (s.sharedFfn() > 0) {
            gateUpReads.add(all(t.gateShared()));
            gateUpReads.add(all(t.upShared()));
            downReads.add(all(t.downShared()));
        }
        gateUp(
                l,
                b,
                step,
                x,
                logits,
                hasBias ? bias : null,
                act,
                ids,
                expertWeights,
                actStride,
                s.expertsUsed(),
                s.sharedFfn(),
                t,
                gateUpReads);
        down(l, step, x, act, ids, expertWeights, actStride, s.expertsUsed(), t, s.sharedFfn(), downReads);
    }

    /**
     * The FFN tensors of a layer: the stacked routed experts' and the shared expert's (a dense layer's FFN takes
     * the shared expert's place; the routed ones stand in where a model has no shared expert, whose slot the
     * kernels then skip).
     */
    private record FfnTensors(
            String gate, String up, String down, String gateShared, String upShared, String downShared) {}

    /** The expert tensors of MoE layer {@code b} ("blk.N."). */
    private FfnTensors moeTensors(String b) {
        String gate = b + "ffn_gate_exps.weight";
        String up = b + "ffn_up_exps.weight";
        String down = b + "ffn_down_exps.weight";
        if (s.sharedFfn() == 0) {
            return new FfnTensors(gate, up, down, gate, up, down);
        }
        return new FfnTensors(
                gate, up, down, b + "ffn_gate_shexp.weight", b + "ffn_up_shexp.weight", b + "ffn_down_shexp.weight");
    }

    /** The bytes of the experts used, of a stacked expert tensor. */
    private Dispatch.WeightRead used(String name) {
        return new Dispatch.WeightRead(name, model.tensor(name).bytes() / s.experts() * s.expertsUsed());
    }

    /**
     * The gate+up dispatch; with routed slots it also makes the expert selection from the router's
     * {@code logits} (and {@code bias}, the tensor name of exp_probs_b or null) and writes it to
     * {@code ids} and {@code expertWeights}.
     */
    private void gateUp(
            int l,
            String b,
            Ref step,
            Ref x,
            Ref logits,
            String bias,
            Ref act,
            Ref ids,
            Ref expertWeights,
            int actStride,
            int routed,
            int sharedRows,
            FfnTensors t,
            List<Dispatch.WeightRead> reads) {
        int rows = Math.max(routed > 0 ? s.expertFfn() : 0, sharedRows);
        int split = Geometry.mvSplit((long) rows * (routed + 1));
        Map<String, Number> a = gateUpArgs(routed, sharedRows, t, bias, actStride, split);
        dispatch(
                "moe_gate_up",
                l,
                new Size3(tokens, routed + 1, groups(rows, Geometry.mvRowsPerThreadgroup(split))),
                MV_THREADS,
                memory(Geometry.MV_SCRATCH_FLOATS),
                reads,
                2 * ffnMultiplyAdds(routed, sharedRows),
                args("GateUpArgs", a),
                x,
                weight(b + "ffn_norm.weight"),
                weight(t.gate()),
                weight(t.up()),
                weight(t.gateShared()),
                weight(t.upShared()),
                logits,
                bias != null ? weight(bias) : logits,
                act,
                ids,
                expertWeights,
                step);
    }

    /**
     * GateUpArgs: {@code routed} slots of the stacked gate/up of {@code t} (0: a dense layer, whose FFN is the shared
     * one) and its shared gate/up of {@code sharedRows} rows; {@code bias} the exp_probs_b tensor or null.
     */
    private Map<String, Number> gateUpArgs(
            int routed, int sharedRows, FfnTensors t, String bias, int actStride, int split) {
        Map<String, Number> a = new LinkedHashMap<>();
        a.put("cols", s.embedding());
        a.put("routed", routed);
        a.put("rows", s.expertFfn());
        a.put("gate_type", type(t.gate()));
        a.put("up_type", type(t.up()));
        a.put("shared_rows", sharedRows);
        a.put("shared_gate_type", type(t.gateShared()));
        a.put("shared_up_type", type(t.upShared()));
        a.put("act_stride", actStride);
        a.put("eps", s.eps());
        a.put("split", split);
        a.put("experts", routed > 0 ? s.experts() : 0);
        a.put("gating", s.gating());
        a.put("has_bias", bias != null ? 1 : 0);
        a.put("normalize", s.expertWeightsNorm() ? 1 : 0);
        a.put("scale", s.expertWeightsScale());
        a.put("tokens", tokens);
        return a;
    }

    /** DownArgs: {@code routed} slots of the stacked down of {@code t} and its shared down of {@code sharedCols} columns. */
    private Map<String, Number> downArgs(int routed, FfnTensors t, int sharedCols, int actStride, int split) {
        Map<String, Number> a = new LinkedHashMap<>();
        a.put("cols", s.expertFfn());
        a.put("rows", s.embedding());
        a.put("routed", routed);
        a.put("type", type(t.down()));
        a.put("shared_cols", sharedCols);
        a.put("shared_type", type(t.downShared()));
        a.put("act_stride", actStride);
        a.put("split", split);
        a.put("experts", routed > 0 ? s.experts() : 0);
        a.put("tokens", tokens);
        return a;
    }

    private void down(
            int l,
            Ref step,
            Ref x,
            Ref act,
            Ref ids,
            Ref expertWeights,
            int actStride,
            int routed,
            FfnTensors t,
            int sharedCols,
            List<Dispatch.WeightRead> reads) {
        int split = Geometry.mvSplit(s.embedding());
        Map<String, Number> a = downArgs(routed, t, sharedCols, actStride, split);
        dispatch(
                "moe_down",
                l,
                Size3.of(tokens, groups(s.embedding(), Geometry.mvRowsPerThreadgroup(split))),
                MV_THREADS,
                memory(Geometry.MV_SCRATCH_FLOATS),
                reads,
                ffnMultiplyAdds(routed, sharedCols),
                args("DownArgs", a),
                weight(t.down()),
                weight(t.downShared()),
                act,
                ids,
                expertWeights,
                x,
                step);
    }
}
