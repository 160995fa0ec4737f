package dev.glimmer.server.cli;

import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.gguf.TensorInfo;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.ModelFacts;

import dev.glimmer.engine.InvalidInputException;

import java.io.IOException;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.stream.Collectors;

/**
 * {@code ./glimmer bench}: prompt processing and decode speed on a model file, measured as llama-bench
 * measures them (pp: a prompt of N random tokens processed as one batch into an empty cache; tg: N
 * tokens decoded one by one after the context given by --ctx), after one warm-up of each, with the
 * median and spread over --reps repetitions; see docs/BENCH.md.
 */
final class BenchCommand implements Command {
    private static final int DEFAULT_PP = 64;
    private static final int DEFAULT_TG = 16;
    private static final int DEFAULT_REPS = 5;

    @Override
    public String name() {
        return "bench";
    }

    @Override
    public String summary() {
        return "measure prompt processing and decode speed (tok/s), load time and memory";
    }

    @Override
    public List<Option> options() {
        return List.of(
                Option.required("--model", "F", "the GGUF file"),
                Option.value("--pp", "N", "prompt tokens processed as one batch (default " + DEFAULT_PP + ", 0: skip)"),
                Option.value("--tg", "N", "tokens decoded one by one (default " + DEFAULT_TG + ", 0: skip)"),
                Option.value("--threads", "N", "threads (default: one per physical core, here " + CpuBackend.defaultThreads() + ")"),
                Option.value("--backend", "B", "the backend: cpu (default cpu)"),
                Option.value("--reps", "N", "repetitions of each measurement (default " + DEFAULT_REPS + ")"),
                Option.value("--bandwidth", "GBPS", "the machine's memory bandwidth, to report decode as a fraction of its limit"),
                Option.value("--ctx", "N", "tokens already in the context when decoding starts (default 0)"),
                Option.flag("--mlock", "lock the mapped file in RAM first (as llama-bench -lm mmap+mlock), so that page cache\n"
                        + "    eviction cannot disturb the measurement"));
    }

    @Override
    public String details() {
        return """
                pp: a prompt of N random token ids is run through the model as one batch into an empty cache.
                tg: N tokens are decoded one at a time, each fed back, after --ctx positions of context; those
                positions are filled with random cache rows rather than computed (the cost of attention depends
                only on their number), so a long context is quick to set up.
                Reported: model facts and weight bytes read per decode token, load time (open, map, ready), the
                median tok/s with min..max over --reps, decode as a fraction of the bandwidth limit (--bandwidth
                GB/s ÷ bytes per token), and the peak anonymous memory (everything but the mapped file).
                The last line is for scripts: pp_tok_s=… tg_tok_s=…
                Example: ./glimmer bench --model /tmp/glm-full-q4_0.gguf --pp 64 --tg 16 --bandwidth 22.4""";
    }

    @Override
    public int run(Args args, Terminal io) throws Exception {
        int pp = args.integer("--pp", DEFAULT_PP);
        int tg = args.integer("--tg", DEFAULT_TG);
        int reps = args.integer("--reps", DEFAULT_REPS);
        int depth = args.integer("--ctx", 0);
        int threads = args.integer("--threads", CpuBackend.defaultThreads());
        double bandwidth = args.decimal("--bandwidth", 0);
        String backendName = args.string("--backend", "cpu");
        if (pp < 0 || tg < 0 || pp + tg == 0) {
            throw new UsageException("--pp and --tg must be ≥ 0 and not both 0, got " + pp + " and " + tg);
        }
        if (reps < 1 || depth < 0 || threads < 1 || bandwidth < 0) {
            throw new UsageException("--reps and --threads must be ≥ 1, --ctx and --bandwidth ≥ 0");
        }
        if (!backendName.equals("cpu")) {
            throw new UsageException("unknown backend '" + backendName + "' (available: cpu)");
        }
        Path file = args.existingFile("--model");
        MemoryPeak memory = MemoryPeak.begin();

        long loadStart = System.nanoTime();
        try (GlmModel model = GlmModel.open(file)) {
            int contextSize = Math.max(pp, depth + tg);
            int batch = Math.max(1, Math.min(pp, GlmForward.DEFAULT_BATCH));
            try (KvCache cache = model.newCache(contextSize, KvCacheType.DEFAULT)) {
                GlmForward forward = new GlmForward(model, new CpuBackend(threads), batch);
                double loadSeconds = (System.nanoTime() - loadStart) / 1e9;

                long bytesPerToken = ModelFacts.weightBytesPerToken(model.file());
                io.out().printf(Locale.ROOT, "model: %s (%.2f GB), weights: %s%n", file, model.file().fileSize() / 1e9,
                        weightTypes(model.file().tensors()));
                io.out().printf(Locale.ROOT, "weights read per decode token: %.3f GB%n", bytesPerToken / 1e9);
                io.out().printf(Locale.ROOT, "backend: %s, threads: %d; load: %.2f s%n", backendName, threads, loadSeconds);
                if (args.has("--mlock")) {
                    long lockStart = System.nanoTime();
                    lock(model.file().mapping());
                    io.out().printf(Locale.ROOT, "locked the mapping in RAM in %.1f s%n", (System.nanoTime() - lockStart) / 1e9);
                }

                Random random = new Random(42);
                int[] tokens = random.ints(Math.max(pp, tg + 1), 0, model.vocabSize()).toArray();
                double ppRate = Double.NaN;
                double tgRate = Double.NaN;
                if (pp > 0) {
                    double[] rates = new double[reps];
                    prompt(forward, cache, tokens, pp); // warm-up
                    for (int r = 0; r < reps; r++) {
                        rates[r] = prompt(forward, cache, tokens, pp);
                    }
                    ppRate = report(io, "pp" + pp, rates);
                }
                if (tg > 0) {
                    double[] rates = new double[reps];
                    fillContext(cache, depth, random);
                    decode(forward, cache, tokens, Math.min(tg, 2), depth); // warm-up
                    for (int r = 0; r < reps; r++) {
                        rates[r] = decode(forward, cache, tokens, tg, depth);
                    }
                    tgRate = report(io, "tg" + tg + (depth > 0 ? " @ ctx " + depth : ""), rates);
                    io.out().printf(Locale.ROOT, "decode streams %.1f GB/s of weights%s%n", tgRate * bytesPerToken / 1e9,
                            bandwidth > 0 ? String.format(Locale.ROOT, ", %.0f %% of the %.1f GB/s limit (%.2f tok/s)",
                                    100 * tgRate * bytesPerToken / (bandwidth * 1e9), bandwidth, bandwidth * 1e9 / bytesPerToken) : "");
                }
                io.out().printf(Locale.ROOT, "peak memory beyond the mapped file: %.2f GB (anonymous resident, sampled; cache %.2f GB)%n",
                        memory.end() / 1e9, cache.bytes() / 1e9);
                io.out().printf(Locale.ROOT, "pp_tok_s=%.2f tg_tok_s=%.2f%n", ppRate, tgRate);
            }
        }
        return 0;
    }

    /** mlock(2) on the mapping: reads it all in and keeps it resident until the process ends. */
    private static void lock(MemorySegment mapping) {
        Linker linker = Linker.nativeLinker();
        MethodHandle mlock = linker.downcallHandle(linker.defaultLookup().find("mlock").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG));
        int rc;
        try {
            rc = (int) mlock.invokeExact(mapping, mapping.byteSize());
        } catch (Throwable e) {
            throw new IllegalStateException("mlock failed", e);
        }
        if (rc != 0) {
            throw new InvalidInputException("cannot lock " + mapping.byteSize() / 1_000_000 + " MB in RAM (mlock failed:"
                    + " not enough memory, or no permission to lock that much)");
        }
    }

    /** Tokens per second of one prompt of {@code n} tokens into an empty cache. */
    private static double prompt(GlmForward forward, KvCache cache, int[] tokens, int n) {
        cache.truncate(0);
        long start = System.nanoTime();
        forward.forward(cache, tokens, 0, n, false);
        return n / ((System.nanoTime() - start) / 1e9);
    }

    /** Tokens per second of {@code n} single-token steps after {@code depth} positions of context. */
    private static double decode(GlmForward forward, KvCache cache, int[] tokens, int n, int depth) {
        cache.truncate(depth);
        long start = System.nanoTime();
        for (int i = 0; i < n; i++) {
            forward.forward(cache, tokens, i, 1, false);
        }
        return n / ((System.nanoTime() - start) / 1e9);
    }

    /** The first {@code depth} positions of every layer filled with random rows of a plausible size. */
    private static void fillContext(KvCache cache, int depth, Random random) {
        cache.truncate(0);
        float[] row = new float[cache.rowWidth()];
        for (int p = 0; p < depth; p++) {
            for (int layer = 0; layer < cache.layers(); layer++) {
                for (int i = 0; i < row.length; i++) {
                    row[i] = (float) random.nextGaussian();
                }
                cache.write(layer, p, row, 0);
            }
        }
        cache.advance(depth);
    }

    private static double report(Terminal io, String test, double[] rates) {
        double[] sorted = rates.clone();
        Arrays.sort(sorted);
        double median = sorted.length % 2 == 1 ? sorted[sorted.length / 2]
                : (sorted[sorted.length / 2 - 1] + sorted[sorted.length / 2]) / 2;
        io.out().printf(Locale.ROOT, "%-14s %8.2f tok/s (min %.2f, max %.2f over %d)%n", test, median, sorted[0],
                sorted[sorted.length - 1], sorted.length);
        return median;
    }

    private static String weightTypes(List<TensorInfo> tensors) {
        Map<String, Long> count = new TreeMap<>(tensors.stream()
                .collect(Collectors.groupingBy(t -> t.type().ggmlName(), Collectors.counting())));
        return count.entrySet().stream().map(e -> e.getValue() + " " + e.getKey()).collect(Collectors.joining(", "));
    }

    /**
     * The peak of the process's anonymous resident memory (Linux {@code RssAnon}: heap, off-heap buffers,
     * the KV cache, thread stacks; not the file mapping, which is page cache), sampled every 20 ms.
     */
    private static final class MemoryPeak extends Thread {
        private volatile boolean running = true;
        private volatile long peak;

        static MemoryPeak begin() {
            MemoryPeak sampler = new MemoryPeak();
            sampler.setDaemon(true);
            sampler.start();
            return sampler;
        }

        @Override
        public void run() {
            while (running) {
                peak = Math.max(peak, anonymousBytes());
                try {
                    Thread.sleep(20);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }

        long end() {
            running = false;
            return Math.max(peak, anonymousBytes());
        }

        private static long anonymousBytes() {
            try {
                for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                    if (line.startsWith("RssAnon:")) {
                        return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
                    }
                }
            } catch (IOException | NumberFormatException e) {
                // not Linux: no figure
            }
            return 0;
        }
    }
}
