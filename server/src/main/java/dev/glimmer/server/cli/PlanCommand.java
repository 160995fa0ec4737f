package dev.glimmer.server.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.glimmer.engine.backend.commandlist.DecodeModels;
import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.model.GlmConfig;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.decode.CommandList;
import dev.glimmer.kernels.decode.DecodeCommandListBuilder;
import dev.glimmer.kernels.decode.DecodeModel;
import dev.glimmer.kernels.decode.MemoryBudget;
import dev.glimmer.kernels.decode.PlanSummary;
import java.io.PrintStream;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code ./glimmer plan}: the GPU decode step of a model file as the Metal backend would encode it,
 * summarized without running it (the file is only mapped, so this works on the full-size model), and the
 * device memory a server's pool of conversations takes, per part ({@link MemoryBudget}).
 */
@Command(
        name = "plan",
        description = "show the GPU decode step of a model: dispatches, weight bytes per token, GPU limits,"
                + " and the GPU memory of serving it",
        footer = """
                Checks: at most 12 dispatches per layer (launches are dependent: each one costs latency), weight bytes per
                token equal to the model's active weight bytes (no gathers, no dequantized copies), threadgroup memory per
                kernel at most 32 KiB, at most 31 buffer bindings per dispatch, binding offsets below 4 GiB, and with
                --gpu-memory, the pool of conversations (weights, KV pool, activations) within it.
                Exit code 1 when a check fails.""")
final class PlanCommand implements Subcommand {
    private static final int DEFAULT_CONTEXT = 8192;

    @Mixin
    ModelFile modelFile;

    @Option(
            names = "--ctx",
            paramLabel = "N",
            description = "KV cache positions to size the cache for (default 8192, at most the model's context length)")
    Integer contextOption;

    @Option(
            names = "--parallel",
            paramLabel = "P",
            description = "conversations decoded together, as serve's --parallel (default 2): the KV pool holds P + 2")
    int parallel = 2;

    @Option(
            names = "--gpu-memory",
            paramLabel = "GB",
            description = "GPU memory to check the pool against (e.g. 24), in GB of 10^9 bytes")
    Double gpuMemoryGb;

    @Option(names = "--json", description = "print JSON instead of text")
    boolean json;

    @Override
    public int run(Terminal io) throws Exception {
        try (GgufFile file = GgufFile.open(modelFile.path(io))) {
            GlmConfig config = GlmConfig.from(file);
            int ctx = contextOption != null ? contextOption : Math.min(DEFAULT_CONTEXT, config.contextLength());
            if (ctx <= 0 || ctx > config.contextLength()) {
                throw new UsageException("--ctx must be in 1.." + config.contextLength() + ", got " + ctx);
            }
            if (parallel < 1) {
                throw new UsageException("--parallel must be at least 1, got " + parallel);
            }
            if (gpuMemoryGb != null && !(gpuMemoryGb > 0)) {
                throw new UsageException("--gpu-memory must be a positive number of GB, got " + gpuMemoryGb);
            }
            // with the NextN block where the file has one: serve drafts with it by default (its weights, its KV rows)
            DecodeModel model = DecodeModels.of(file, config, true);
            CommandList list = DecodeCommandListBuilder.build(model, ctx);
            PlanSummary p = PlanSummary.of(model, list);
            long gpuMemory = gpuMemoryGb == null ? 0 : Math.round(gpuMemoryGb * 1e9);
            // the pool serve would make: with --gpu-memory, its spare cached conversations only where they fit
            MemoryBudget budget =
                    MemoryBudget.forServing(model, ctx, parallel, gpuMemoryGb == null ? -1 : gpuMemory, false);
            Map<String, Boolean> checks = checks(p);
            if (gpuMemoryGb != null) {
                checks.put("pool_within_gpu_memory", budget.fits(gpuMemory, false));
            }
            if (json) {
                Map<String, Object> json = new LinkedHashMap<>();
                json.put("model", file.path().getFileName().toString());
                json.put("context", ctx);
                json.put("dispatches_per_token", p.dispatches());
                json.put("max_dispatches_per_layer", p.maxDispatchesPerLayer());
                Map<String, Integer> perLayer = new LinkedHashMap<>();
                p.dispatchesPerLayer().forEach((l, n) -> perLayer.put(l < 0 ? "outside_layers" : String.valueOf(l), n));
                json.put("dispatches_per_layer", perLayer);
                json.put("dispatches_per_kernel", p.dispatchesPerKernel());
                json.put("weight_bytes_per_token", p.weightBytesPerToken());
                json.put("active_weight_bytes", p.activeWeightBytes());
                json.put("threadgroup_memory_bytes", p.threadgroupMemory());
                json.put("max_bindings_per_dispatch", p.maxBindings());
                json.put("max_binding_offset", p.maxBindingOffset());
                json.put("weight_buffers", p.weightBuffers());
                json.put("kv_cache_bytes", p.kvCacheBytes());
                json.put("activation_bytes", p.activationBytes());
                Map<String, Object> memory = new LinkedHashMap<>();
                memory.put("conversations", budget.slots());
                memory.put("context", budget.context());
                memory.put("weights_bytes", budget.weights());
                memory.put("kv_pool_bytes", budget.kvPool());
                memory.put("kv_bytes_per_token", budget.kvBytesPerToken());
                memory.put("activations_bytes", budget.activations());
                memory.put("total_bytes", budget.total());
                if (gpuMemoryGb != null) {
                    memory.put("gpu_memory_bytes", gpuMemory);
                    memory.put("context_that_fits", budget.contextThatFits(gpuMemory, false));
                    memory.put("conversations_that_fit", budget.slotsThatFit(gpuMemory, false));
                }
                json.put("gpu_memory", memory);
                json.put("checks", checks);
                io.out()
                        .println(new ObjectMapper()
                                .enable(SerializationFeature.INDENT_OUTPUT)
                                .writeValueAsString(json));
            } else {
                text(io.out(), file, ctx, p, checks);
                memoryText(io.out(), budget, parallel, gpuMemoryGb == null ? -1 : gpuMemory);
            }
            io.out().flush();
            return checks.containsValue(false) ? 1 : 0;
        }
    }

    private static Map<String, Boolean> checks(PlanSummary p) {
        Map<String, Boolean> c = new LinkedHashMap<>();
        c.put("at_most_12_dispatches_per_layer", p.maxDispatchesPerLayer() <= Geometry.MAX_DISPATCHES_PER_LAYER);
        c.put("weight_bytes_equal_active_bytes", p.weightBytesPerToken() == p.activeWeightBytes());
        c.put(
                "threadgroup_memory_within_32k",
                p.threadgroupMemory().values().stream().allMatch(b -> b <= Geometry.MAX_THREADGROUP_MEMORY));
        c.put("bindings_within_31", p.maxBindings() <= Geometry.MAX_BUFFER_BINDINGS);
        c.put("binding_offsets_below_4g", p.maxBindingOffset() < 1L << 32);
        return c;
    }

    private static void text(PrintStream out, GgufFile file, int ctx, PlanSummary p, Map<String, Boolean> checks) {
        out.println("GPU decode step of " + file.path().getFileName() + " (KV cache for " + ctx + " positions)");
        out.println(
                "dispatches per token: " + p.dispatches() + ", at most " + p.maxDispatchesPerLayer() + " per layer");
        StringBuilder layers = new StringBuilder();
        p.dispatchesPerLayer()
                .forEach((l, n) -> layers.append(layers.isEmpty() ? "" : " ")
                        .append(l < 0 ? "other" : l)
                        .append(':')
                        .append(n));
        out.println("  per layer: " + layers);
        p.dispatchesPerKernel()
                .forEach((k, n) -> out.printf(
                        "  %-14s %4d dispatches, threadgroup memory %6d bytes%n",
                        k, n, p.threadgroupMemory().get(k)));
        out.printf(
                "weight bytes per token: %,d (active weight bytes of the model: %,d)%n",
                p.weightBytesPerToken(), p.activeWeightBytes());
        out.printf(
                "bindings per dispatch: at most %d; largest binding offset: %,d; weight buffers: %d%n",
                p.maxBindings(), p.maxBindingOffset(), p.weightBuffers());
        out.printf("KV cache: %,d bytes; activations: %,d bytes%n", p.kvCacheBytes(), p.activationBytes());
        checks.forEach((name, ok) -> out.println((ok ? "ok     " : "FAILED ") + name));
    }

    /** The pool's memory per part, and against {@code gpuMemory} bytes where given (else -1). */
    private static void memoryText(PrintStream out, MemoryBudget b, int parallel, long gpuMemory) {
        out.printf(
                Locale.ROOT,
                "GPU memory of a KV pool of %d conversations of %,d tokens (--parallel %d, %d more kept cached):%n",
                b.slots(),
                b.context(),
                parallel,
                b.slots() - parallel);
        out.printf(Locale.ROOT, "  weights      %,17d bytes%n", b.weights());
        out.printf(
                Locale.ROOT,
                "  KV pool      %,17d bytes (%,d a token: 16-bit values)%n",
                b.kvPool(),
                b.kvBytesPerToken());
        out.printf(
                Locale.ROOT,
                "  activations  %,17d bytes (the decode, prompt and batch command lists)%n",
                b.activations());
        out.printf(Locale.ROOT, "  total        %,17d bytes%n", b.total());
        if (gpuMemory >= 0) {
            out.println(
                    b.fits(gpuMemory, false)
                            ? String.format(Locale.ROOT, "fits in %,d bytes of GPU memory", gpuMemory)
                            : b.doesNotFit("the GPU", gpuMemory, false));
        }
    }
}
