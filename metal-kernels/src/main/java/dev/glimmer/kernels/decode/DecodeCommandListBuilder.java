package dev.glimmer.kernels.decode;

import dev.glimmer.kernels.ArgStruct;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.KernelLibrary;
import dev.glimmer.kernels.KernelSignature;
import dev.glimmer.kernels.Size3;

import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Builds the {@link CommandList} of one decode step (KERNELS.md §2) from a {@link DecodeModel}:
 * per layer 8 dispatches (q_a/kv_a, q heads + cache row, attention, merge + v_b, attn_output +
 * residual, router, gate+up, down + residual; 7 for a dense layer, which has no router), plus
 * the embedding, the output mat-vec and argmax. Nothing in it depends on the position or KV length.
 */
public final class DecodeCommandListBuilder {

    /** Metal binding offsets are 32-bit. */
    static final long MAX_BINDING_OFFSET = (1L << 32) - 1;
    /** Page size of Apple Silicon: weight buffers start on a page of the mapped file. */
    static final long PAGE = 16384;
    /** Alignment of every argument struct and activation region (constant-buffer offsets must be 256-aligned on some GPUs). */
    static final int ALIGN = 256;

    private static final int MV_THREADS = Geometry.MV_SIMDGROUPS * Geometry.SIMD_WIDTH;
    private static final int WIDE_THREADS = Geometry.WIDE_SIMDGROUPS * Geometry.SIMD_WIDTH;
    private static final int HEAD_THREADS = Geometry.HEAD_SIMDGROUPS * Geometry.SIMD_WIDTH;

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
    private long activationBytes;

    /** A place in a buffer. */
    private record Ref(int buffer, long offset) {
    }

    private DecodeCommandListBuilder(DecodeModel model, int contextLength, KernelLibrary library) {
        this.model = model;
        this.s = model.shape();
        this.library = library;
        check();
        placeWeights();
        argsBuffer = add(new BufferSpec("args", BufferSpec.Kind.ARGS, 0, 0));
        stepBuffer = add(new BufferSpec("step", BufferSpec.Kind.STEP, library.struct("StepArgs").size(), 0));
        activationsBuffer = add(new BufferSpec("activations", BufferSpec.Kind.ACTIVATIONS, 0, 0));
        kvBuffers = new int[s.layers()];
        for (int l = 0; l < s.layers(); l++) {
            kvBuffers[l] = add(new BufferSpec("kv." + l, BufferSpec.Kind.KV_CACHE, 4L * contextLength * s.kvRow(), 0));
        }
    }

    /** The command list of {@code model} with a KV cache of {@code contextLength} rows per layer. */
    public static CommandList build(DecodeModel model, int contextLength) {
        return new DecodeCommandListBuilder(model, contextLength, KernelLibrary.load()).build();
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
        if (s.experts() > Geometry.ROUTER_MAX_EXPERTS) {
            throw new IllegalArgumentException("the expert selection holds at most " + Geometry.ROUTER_MAX_EXPERTS
                    + " experts; the model has " + s.experts());
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
            if (current < 0 || t.fileOffset() + t.bytes() - start > MAX_BINDING_OFFSET) {
                if (current >= 0) {
                    buffers.set(current, new BufferSpec("weights." + current, BufferSpec.Kind.WEIGHTS, end - start, start));
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

    private Ref activation(long floats) {
        long offset = (activationBytes + ALIGN - 1) / ALIGN * ALIGN;
        activationBytes = offset + 4 * Math.max(1, floats);
        return new Ref(activationsBuffer, offset);
    }

    private static int[] memory(long floats) {
        return new int[] {(int) ((4 * floats + 15) / 16 * 16)};
    }

    private void dispatch(String kernel, int layer, Size3 grid, int threads, int[] memory,
                          List<Dispatch.WeightRead> reads, Ref... bindings) {
        KernelSignature k = library.kernel(kernel);
        if (bindings.length != k.bufferCount()) {
            throw new IllegalStateException(kernel + " binds " + k.bufferCount() + " buffers, got " + bindings.length);
        }
        List<Dispatch.Binding> list = new ArrayList<>();
        for (int i = 0; i < bindings.length; i++) {
            list.add(new Dispatch.Binding(i, bindings[i].buffer(), bindings[i].offset()));
        }
        dispatches.add(new Dispatch(kernel, layer, list, grid, Size3.of(threads), memory, !dispatches.isEmpty(), reads));
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
        Ref x = activation(s.embedding());
        Ref qa = activation(s.qLora());
        Ref kv = activation(s.kvRow());
        Ref q = activation((long) s.heads() * s.kvRow());
        Ref partials = activation((long) Geometry.ATTENTION_SPLITS * s.heads() * (s.latent() + 2));
        Ref o = activation((long) s.heads() * s.vHead());
        Ref routerLogits = activation(Math.max(1, s.experts()));
        Ref ids = activation(Math.max(1, s.expertsUsed()));
        Ref expertWeights = activation(Math.max(1, s.expertsUsed()));
        int actStride = Math.max(Math.max(s.expertFfn(), s.sharedFfn()), s.denseFfn());
        Ref act = activation((long) (s.expertsUsed() + 1) * actStride);
        Ref logits = activation(s.vocab());
        Ref token = activation(1);

        String embd = "token_embd.weight";
        dispatch("embed_row", -1, Size3.of(1), WIDE_THREADS, new int[0],
                List.of(new Dispatch.WeightRead(embd, model.tensor(embd).bytes() / s.vocab())),
                args("EmbedArgs", Map.of("type", type(embd), "cols", s.embedding())), step, weight(embd), x);

        for (int l = 0; l < s.layers(); l++) {
            String b = "blk." + l + ".";
            // 1. attn_norm + q_a and kv_a
            int pairSplit = Geometry.mvSplit(s.qLora() + s.kvRow());
            int perGroup = Geometry.mvRowsPerThreadgroup(pairSplit);
            dispatch("mat_vec_pair", l, Size3.of(groups(s.qLora(), perGroup) + groups(s.kvRow(), perGroup)), MV_THREADS,
                    memory(Geometry.MV_SCRATCH_FLOATS),
                    List.of(all(b + "attn_norm.weight"), all(b + "attn_q_a.weight"), all(b + "attn_kv_a_mqa.weight")),
                    args("MatVecPairArgs", Map.of("cols", s.embedding(), "type1", type(b + "attn_q_a.weight"),
                            "rows1", s.qLora(), "type2", type(b + "attn_kv_a_mqa.weight"), "rows2", s.kvRow(),
                            "eps", s.eps(), "split", pairSplit)),
                    x, weight(b + "attn_norm.weight"), weight(b + "attn_q_a.weight"), qa,
                    weight(b + "attn_kv_a_mqa.weight"), kv);
            // 2. q heads (q_a_norm, q_b, RoPE, k_b absorption) and the cache row
            Map<String, Number> qh = new LinkedHashMap<>();
            qh.put("heads", s.heads());
            qh.put("q_lora", s.qLora());
            qh.put("nope", s.nope());
            qh.put("rope", s.rope());
            qh.put("latent", s.latent());
            qh.put("q_b_type", type(b + "attn_q_b.weight"));
            qh.put("k_b_type", type(b + "attn_k_b.weight"));
            qh.put("eps", s.eps());
            qh.put("rope_base", s.ropeBase());
            dispatch("mla_q_heads", l, Size3.of(s.heads() * Geometry.Q_PARTS + 1), HEAD_THREADS,
                    memory(Geometry.HEAD_SIMDGROUPS + align4(Math.max(s.nope() + s.rope(), s.kvRow()))),
                    List.of(all(b + "attn_q_a_norm.weight"), all(b + "attn_q_b.weight"), all(b + "attn_k_b.weight"),
                            all(b + "attn_kv_a_norm.weight")),
                    args("QHeadsArgs", qh), step, qa, weight(b + "attn_q_a_norm.weight"), weight(b + "attn_q_b.weight"),
                    weight(b + "attn_k_b.weight"), kv, weight(b + "attn_kv_a_norm.weight"), q,
                    new Ref(kvBuffers[l], 0));
            // 3. attention over the cache, split along the KV length
            dispatch("mla_attention", l, Size3.of(Geometry.ATTENTION_SPLITS), WIDE_THREADS, new int[0], List.of(),
                    args("AttentionArgs", Map.of("heads", s.heads(), "latent", s.latent(), "rope", s.rope(),
                            "splits", Geometry.ATTENTION_SPLITS, "scale", s.kqScale())),
                    step, q, new Ref(kvBuffers[l], 0), partials);
            // 4. merge + v_b
            dispatch("mla_merge", l, Size3.of(s.heads() * Geometry.MERGE_PARTS), HEAD_THREADS,
                    memory(s.latent() + Geometry.ATTENTION_SPLITS), List.of(all(b + "attn_v_b.weight")),
                    args("MergeArgs", Map.of("heads", s.heads(), "latent", s.latent(), "splits", Geometry.ATTENTION_SPLITS,
                            "v_head", s.vHead(), "v_b_type", type(b + "attn_v_b.weight"))),
                    step, partials, weight(b + "attn_v_b.weight"), o);
            // 5. attn_output + residual
            matVec(l, b + "attn_output.weight", s.heads() * s.vHead(), s.embedding(), o, x, null, x);
            // 6-8. the FFN
            if (l < s.denseLayers()) {
                denseFfn(l, b, x, routerLogits, act, ids, expertWeights, actStride);
            } else {
                moe(l, b, x, routerLogits, act, ids, expertWeights, actStride);
            }
        }
        String out = model.has("output.weight") ? "output.weight" : embd;
        matVec(-1, out, s.embedding(), s.vocab(), x, logits, weight("output_norm.weight"), null);
        dispatches.set(dispatches.size() - 1, withRead(dispatches.getLast(), all("output_norm.weight")));
        dispatch("argmax", -1, Size3.of(1), WIDE_THREADS, memory(2L * Geometry.WIDE_SIMDGROUPS), List.of(),
                args("ArgmaxArgs", Map.of("n", s.vocab())), logits, token);

        List<BufferSpec> finalBuffers = new ArrayList<>(buffers);
        finalBuffers.set(argsBuffer, new BufferSpec("args", BufferSpec.Kind.ARGS, args.size(), 0));
        finalBuffers.set(activationsBuffer, new BufferSpec("activations", BufferSpec.Kind.ACTIVATIONS, activationBytes, 0));
        return new CommandList(finalBuffers, args.toByteArray(), dispatches, logits.offset(), token.offset());
    }

    private static Dispatch withRead(Dispatch d, Dispatch.WeightRead read) {
        List<Dispatch.WeightRead> reads = new ArrayList<>(d.weightReads());
        reads.add(read);
        return new Dispatch(d.kernel(), d.layer(), d.bindings(), d.grid(), d.threads(), d.threadgroupMemory(), d.barrier(),
                reads);
    }

    /** y = W x (+ residual), x optionally RMS-normalized with {@code norm}; y == residual for the in-place residual add. */
    private void matVec(int layer, String w, int cols, int rows, Ref x, Ref y, Ref norm, Ref residual) {
        Ref out = y != null ? y : residual;
        Map<String, Number> a = new LinkedHashMap<>();
        a.put("type", type(w));
        a.put("cols", cols);
        a.put("rows", rows);
        a.put("x_stride", cols);
        a.put("y_stride", rows);
        a.put("norm", norm != null ? 1 : 0);
        a.put("add", residual != null ? 1 : 0);
        a.put("eps", s.eps());
        int split = Geometry.mvSplit(rows);
        a.put("split", split);
        dispatch("mat_vec", layer, Size3.of(groups(rows, Geometry.mvRowsPerThreadgroup(split))), MV_THREADS,
                memory(Geometry.MV_SCRATCH_FLOATS), List.of(all(w)), args("MatVecArgs", a), weight(w), x, out,
                norm != null ? norm : x, residual != null ? residual : out);
    }

    private void denseFfn(int l, String b, Ref x, Ref logits, Ref act, Ref ids, Ref expertWeights, int actStride) {
        String gate = b + "ffn_gate.weight";
        String up = b + "ffn_up.weight";
        String down = b + "ffn_down.weight";
        gateUp(l, b, x, logits, null, act, ids, expertWeights, actStride, 0, s.denseFfn(), gate, up, gate, up,
                List.of(all(b + "ffn_norm.weight"), all(gate), all(up)));
        down(l, x, act, ids, expertWeights, actStride, 0, down, s.denseFfn(), down, List.of(all(down)));
    }

    private void moe(int l, String b, Ref x, Ref logits, Ref act, Ref ids, Ref expertWeights, int actStride) {
        String router = b + "ffn_gate_inp.weight";
        String bias = b + "exp_probs_b.bias";
        boolean hasBias = model.has(bias);
        int routerSplit = Geometry.mvSplit(s.experts());
        dispatch("moe_router", l, Size3.of(groups(s.experts(), Geometry.mvRowsPerThreadgroup(routerSplit))), MV_THREADS,
                memory(Geometry.MV_SCRATCH_FLOATS), List.of(all(b + "ffn_norm.weight"), all(router)),
                args("RouterArgs", Map.of("type", type(router), "cols", s.embedding(), "experts", s.experts(),
                        "eps", s.eps(), "split", routerSplit)),
                weight(router), x, weight(b + "ffn_norm.weight"), logits);

        String gate = b + "ffn_gate_exps.weight";
        String up = b + "ffn_up_exps.weight";
        String down = b + "ffn_down_exps.weight";
        boolean shared = s.sharedFfn() > 0;
        String gateSh = shared ? b + "ffn_gate_shexp.weight" : gate;
        String upSh = shared ? b + "ffn_up_shexp.weight" : up;
        String downSh = shared ? b + "ffn_down_shexp.weight" : down;
        List<Dispatch.WeightRead> gateUpReads = new ArrayList<>(List.of(all(b + "ffn_norm.weight"), used(gate), used(up)));
        if (hasBias) {
            gateUpReads.add(all(bias));
        }
        List<Dispatch.WeightRead> downReads = new ArrayList<>(List.of(used(down)));
        if (shared) {
            gateUpReads.add(all(gateSh));
            gateUpReads.add(all(upSh));
            downReads.add(all(downSh));
        }
        gateUp(l, b, x, logits, hasBias ? bias : null, act, ids, expertWeights, actStride, s.expertsUsed(), s.sharedFfn(),
                gate, up, gateSh, upSh, gateUpReads);
        down(l, x, act, ids, expertWeights, actStride, s.expertsUsed(), down, s.sharedFfn(), downSh, downReads);
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
    private void gateUp(int l, String b, Ref x, Ref logits, String bias, Ref act, Ref ids, Ref expertWeights,
                        int actStride, int routed, int sharedRows, String gate, String up, String gateSh, String upSh,
                        List<Dispatch.WeightRead> reads) {
        Map<String, Number> a = new LinkedHashMap<>();
        a.put("cols", s.embedding());
        a.put("routed", routed);
        a.put("rows", s.expertFfn());
        a.put("gate_type", type(gate));
        a.put("up_type", type(up));
        a.put("shared_rows", sharedRows);
        a.put("shared_gate_type", type(gateSh));
        a.put("shared_up_type", type(upSh));
        a.put("act_stride", actStride);
        a.put("eps", s.eps());
        int rows = Math.max(routed > 0 ? s.expertFfn() : 0, sharedRows);
        int split = Geometry.mvSplit((long) rows * (routed + 1));
        a.put("split", split);
        a.put("experts", s.experts());
        a.put("gating", s.gating());
        a.put("has_bias", bias != null ? 1 : 0);
        a.put("normalize", s.expertWeightsNorm() ? 1 : 0);
        a.put("scale", s.expertWeightsScale());
        dispatch("moe_gate_up", l, Size3.of(groups(rows, Geometry.mvRowsPerThreadgroup(split)), routed + 1), MV_THREADS,
                memory(Geometry.MV_SCRATCH_FLOATS), reads, args("GateUpArgs", a), x, weight(b + "ffn_norm.weight"),
                weight(gate), weight(up), weight(gateSh), weight(upSh), logits, bias != null ? weight(bias) : logits, act,
                ids, expertWeights);
    }

    private void down(int l, Ref x, Ref act, Ref ids, Ref expertWeights, int actStride, int routed, String down,
                      int sharedCols, String downSh, List<Dispatch.WeightRead> reads) {
        Map<String, Number> a = new LinkedHashMap<>();
        a.put("cols", s.expertFfn());
        a.put("rows", s.embedding());
        a.put("routed", routed);
        a.put("type", type(down));
        a.put("shared_cols", sharedCols);
        a.put("shared_type", type(downSh));
        a.put("act_stride", actStride);
        int split = Geometry.mvSplit(s.embedding());
        a.put("split", split);
        dispatch("moe_down", l, Size3.of(groups(s.embedding(), Geometry.mvRowsPerThreadgroup(split))), MV_THREADS,
                memory(Geometry.MV_SCRATCH_FLOATS),
                reads, args("DownArgs", a), weight(down), weight(downSh), act, ids, expertWeights, x);
    }
}
