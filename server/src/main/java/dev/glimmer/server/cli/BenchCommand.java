package dev.glimmer.server.cli;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.KernelTimings;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.choice.BackendChoice;
import dev.glimmer.engine.backend.choice.Backends;
import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.backend.cpu.CpuProfile;
import dev.glimmer.engine.backend.cpu.CpuSequencePool;
import dev.glimmer.engine.generate.Drafting;
import dev.glimmer.engine.generate.GenerationRequest;
import dev.glimmer.engine.generate.GenerationResult;
import dev.glimmer.engine.generate.Generator;
import dev.glimmer.engine.generate.TextDecoder;
import dev.glimmer.engine.generate.Vocabulary;
import dev.glimmer.engine.gguf.TensorInfo;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.ModelFacts;
import dev.glimmer.engine.sampling.SamplingParams;
import dev.glimmer.server.inference.BackendChooser;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.stream.Collectors;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code ./glimmer bench}: prompt processing and decode speed on a model file, measured as llama-bench
 * measures them (pp: a prompt of N random tokens processed into an empty cache; tg: N tokens decoded
 * one by one after the context given by --ctx), after one warm-up of each, with the median and spread
 * over --reps repetitions; see docs/BENCHMARKS.md. The sequence is one of the backend's {@link SequencePool}, as the
 * server runs it (on the CPU the prompt is one batch of the forward pass); on a GPU the report adds the GPU memory used
 * and, where the backend can time its kernels, where a step's time goes.
 */
@Command(
        name = "bench",
        description = "measure prompt processing and decode speed (tok/s), load time and memory",
        footer = """
                pp: a prompt of N random token ids is run into an empty cache (on the CPU as one batch; on a GPU
                through the backend's pool, as the server runs it: prompts through its prompt command list, in
                batches of up to 512 tokens).
                tg: N tokens are decoded greedily after --ctx positions of context (on a GPU as a greedy request
                is served: each step chained on the device on the one before's greedy token, which is read back
                one step behind, without the logits). On the CPU those
                positions are random cache rows rather than computed (the cost of attention depends only on
                their number), so a long context is quick to set up; on a GPU they are computed once.
                Reported: model facts and weight bytes read per decode token, the backend (with --backend auto
                or a GPU that cannot serve this model: which one and why; on the CPU the kernels that ran),
                load time (open, map, weights on the device or the mapping's pages populated: ready), the
                median tok/s with min..max over --reps after one warm-up repetition, decode as a fraction of the
                bandwidth limit (--bandwidth GB/s ÷ bytes per token), the peak anonymous memory (everything but
                the mapped file); on the CPU the time per kind of operation of one prompt and one decode step
                (ms, share, calls, weight GB/s, GMAC/s); on CUDA also the GPU memory used and the GPU time per
                kernel of one decode step and of one prompt batch.
                The GPU self-test is not run (./glimmer selftest runs it).
                --draft mtp (a file with the NextN block, e.g. from synth --mtp; the CPU only): also greedy
                generations of --tg tokens with --draft-tokens drafts per step against the same without drafts,
                alternating within each of --reps repetitions; at each --draft-accept A every draft is replaced by
                the right token with probability A (by a wrong one otherwise), so that drafting, verification and
                rollback run at a chosen acceptance on random weights, and the tokens are checked to be the same;
                every step drafts, except in the last row (A = 0, drafting only while it pays, as generate and serve do).
                The last line is for scripts: pp_tok_s=… tg_tok_s=…
                --batch: N conversations of one KV pool, each after a 16-token prompt (and --ctx), decode --tg tokens
                each in steps that advance all N at once; reported as aggregate tok/s (N x tg / time), as
                llama-batched-bench -npp 16 -ntg tg -npl N reports its S_TG (on the CPU too: one batched forward
                pass per step, as the server runs it); on CUDA with the profile of one step.
                Example: ./glimmer bench --model /tmp/glm-full-q4_0.gguf --pp 64 --tg 16 --bandwidth 22.4
                         ./glimmer bench --model /tmp/glm-full-q4_0.gguf --backend cuda --pp 512 --tg 64 --ctx 4096""")
final class BenchCommand implements Subcommand {
    private static final int DEFAULT_PP = 64;
    private static final int DEFAULT_TG = 16;
    private static final int DEFAULT_REPS = 5;

    private final BackendChooser backends;

    /** The bench of the CLI: the backend from {@link Backends#choose}, without the self-test (it measures speed only). */
    BenchCommand() {
        this((requested, model, cpu) -> Backends.choose(requested, model, false, cpu));
    }

    /** A bench on the backends {@code backends} gives (tests: a GPU-style pool without a GPU). */
    BenchCommand(BackendChooser backends) {
        this.backends = backends;
    }

    @Mixin
    ModelFile modelFile;

    @Option(
            names = "--pp",
            paramLabel = "N",
            description = "prompt tokens processed as one batch (default " + DEFAULT_PP + ", 0: skip)")
    int pp = DEFAULT_PP;

    @Option(
            names = "--tg",
            paramLabel = "N",
            description = "tokens decoded one by one (default " + DEFAULT_TG + ", 0: skip)")
    int tg = DEFAULT_TG;

    @Option(
            names = "--threads",
            paramLabel = "N",
            description = "threads (default: one per physical core, here ${DEFAULT-VALUE})")
    int threads = CpuBackend.defaultThreads();

    @Option(
            names = "--backend",
            paramLabel = "B",
            completionCandidates = ServingBackends.class,
            description = "${COMPLETION-CANDIDATES} (default cpu); auto takes a GPU where there is one")
    String backendName = "cpu";

    @Option(
            names = "--reps",
            paramLabel = "N",
            description = "repetitions of each measurement (default " + DEFAULT_REPS + ")")
    int reps = DEFAULT_REPS;

    @Option(
            names = "--bandwidth",
            paramLabel = "GBPS",
            description = "the machine's memory bandwidth, to report decode as a fraction of its limit")
    double bandwidth;

    @Option(
            names = "--ctx",
            paramLabel = "N",
            description =
                    "tokens already in the context when decoding starts: random cache rows (a prompt for --batch); default 0")
    int depth;

    @Option(
            names = "--batch",
            paramLabel = "N[,N...]",
            split = ",",
            description = "also decode N conversations together (their aggregate tok/s)")
    List<Integer> batches = new ArrayList<>();

    @Mixin
    DraftOptions draftOptions;

    @Option(
            names = "--draft-accept",
            paramLabel = "A[,A...]",
            split = ",",
            description = "with --draft mtp: acceptances to measure decode at (default 0,0.4,0.6,0.8,1): each draft is"
                    + " replaced by the right token with probability A, by a wrong one otherwise")
    List<Double> draftAccepts = new ArrayList<>(List.of(0.0, 0.4, 0.6, 0.8, 1.0));

    @Option(
            names = "--mlock",
            description = "lock the mapped file in RAM first (as llama-bench -lm mmap+mlock), so that"
                    + " page cache eviction cannot disturb the measurement")
    boolean mlock;

    /** The backends bench measures on, for its --help. */
    static final class ServingBackends implements Iterable<String> {
        @Override
        public Iterator<String> iterator() {
            return BackendKind.SERVING.stream()
                    .sorted()
                    .map(BackendKind::cliName)
                    .iterator();
        }
    }

    @Override
    public int run(Terminal io) throws Exception {
        BackendKind requested = BackendKind.parse(backendName, BackendKind.SERVING);
        if (batches.stream().anyMatch(n -> n < 1) || !batches.isEmpty() && tg == 0) {
            throw new UsageException("--batch counts must be ≥ 1, and --batch needs --tg > 0");
        }
        if (pp < 0 || tg < 0 || pp + tg == 0) {
            throw new UsageException("--pp and --tg must be ≥ 0 and not both 0, got " + pp + " and " + tg);
        }
        if (reps < 1 || depth < 0 || threads < 1 || bandwidth < 0) {
            throw new UsageException("--reps and --threads must be ≥ 1, --ctx and --bandwidth ≥ 0");
        }
        if (draftAccepts.stream().anyMatch(a -> !(a >= 0 && a <= 1))) {
            throw new UsageException("--draft-accept values must be within 0..1, got " + draftAccepts);
        }
        Path file = modelFile.path(io);
        MemoryPeak memory = MemoryPeak.begin();

        long loadStart = System.nanoTime();
        try (GlmModel model = GlmModel.open(file)) {
            int drafts = draftOptions.drafts(model);
            if (drafts > 0 && tg == 0) {
                throw new UsageException("--draft mtp measures decode: it needs --tg > 0");
            }
            int contextSize = Math.max(pp, depth + tg);
            // on the CPU a prompt is one batch of the forward pass, and so is a --batch step of all its conversations
            int rows = Math.max(
                    Math.min(pp, GlmForward.DEFAULT_BATCH),
                    batches.stream().mapToInt(Integer::intValue).max().orElse(1));
            Backends.CpuOptions cpuOptions = new Backends.CpuOptions(threads, KvCacheType.DEFAULT, Math.max(1, rows));
            BackendChoice choice = backends.choose(requested, model, cpuOptions);
            if (choice.kind() == BackendKind.CPU) {
                model.file().populate(); // as the server does: part of the load
            }
            try (Measured sequence = new Measured(choice.pool(1, contextSize))) {
                double loadSeconds = (System.nanoTime() - loadStart) / 1e9;
                CpuBackend cpu = sequence.cpu();

                long bytesPerToken = ModelFacts.weightBytesPerToken(model.file());
                io.out()
                        .printf(
                                Locale.ROOT,
                                "model: %s (%.2f GB), weights: %s%n",
                                file,
                                model.file().fileSize() / 1e9,
                                weightTypes(model.file().tensors()));
                io.out().printf(Locale.ROOT, "weights read per decode token: %.3f GB%n", bytesPerToken / 1e9);
                io.out()
                        .printf(
                                Locale.ROOT,
                                "backend: %s, %s; load: %.2f s%n",
                                choice.name(),
                                cpu != null ? "threads: " + threads + ", " + cpu.kernels() : choice.reason(),
                                loadSeconds);
                if (requested != choice.kind()) {
                    io.err().println("glimmer bench: measuring " + choice.name() + ": " + choice.reason());
                }
                if (mlock) {
                    long lockStart = System.nanoTime();
                    lock(model.file().mapping());
                    io.out()
                            .printf(
                                    Locale.ROOT,
                                    "locked the mapping in RAM in %.1f s%n",
                                    (System.nanoTime() - lockStart) / 1e9);
                }

                Random random = new Random(42);
                int[] tokens = random.ints(Math.max(pp, Math.max(depth, tg + 1)), 0, model.vocabSize())
                        .toArray();
                double ppRate = Double.NaN;
                double tgRate = Double.NaN;
                if (pp > 0) {
                    double[] rates = new double[reps];
                    sequence.prompt(tokens, pp); // warm-up
                    if (cpu != null) {
                        cpu.profile().reset();
                    }
                    for (int r = 0; r < reps; r++) {
                        rates[r] = sequence.prompt(tokens, pp);
                    }
                    ppRate = report(io, "pp" + pp, rates);
                    if (cpu != null) {
                        printCpuProfile(
                                io,
                                "CPU time per operation, one prompt of " + pp + " tokens:",
                                cpu.profile(),
                                reps,
                                java.util.stream.DoubleStream.of(rates)
                                        .map(rate -> pp / rate)
                                        .toArray());
                    }
                }
                if (tg > 0) {
                    double[] rates = new double[reps];
                    sequence.fillContext(depth, random);
                    // Warm-up: one whole repetition, so that the JIT has compiled the decode step's Java side
                    // before the timed ones (one token left it compiling through the first repetitions).
                    sequence.decode(tokens, tg, depth);
                    if (cpu != null) {
                        cpu.profile().reset();
                    }
                    for (int r = 0; r < reps; r++) {
                        rates[r] = sequence.decode(tokens, tg, depth);
                    }
                    tgRate = report(io, "tg" + tg + (depth > 0 ? " @ ctx " + depth : ""), rates);
                    if (cpu != null) {
                        printCpuProfile(
                                io,
                                "CPU time per operation, one decode step:",
                                cpu.profile(),
                                (long) reps * tg,
                                java.util.stream.DoubleStream.of(rates)
                                        .map(rate -> tg / rate)
                                        .toArray());
                    }
                    io.out()
                            .printf(
                                    Locale.ROOT,
                                    "decode streams %.1f GB/s of weights%s%n",
                                    tgRate * bytesPerToken / 1e9,
                                    bandwidth > 0
                                            ? String.format(
                                                    Locale.ROOT,
                                                    ", %.0f %% of the %.1f GB/s limit (%.2f tok/s)",
                                                    100 * tgRate * bytesPerToken / (bandwidth * 1e9),
                                                    bandwidth,
                                                    bandwidth * 1e9 / bytesPerToken)
                                            : "");
                }
                io.out()
                        .printf(
                                Locale.ROOT,
                                "peak memory beyond the mapped file: %.2f GB (anonymous resident, sampled; %s)%n",
                                memory.end() / 1e9,
                                sequence.memory(cpu != null));
                choice.gpuMemoryUsed()
                        .ifPresent(bytes -> io.out()
                                .printf(
                                        Locale.ROOT,
                                        "GPU memory used: %.2f GB (weights and one sequence of %d positions)%n",
                                        bytes / 1e9,
                                        contextSize));
                if (sequence.pool.timings().isPresent()) {
                    KernelTimings timings = sequence.pool.timings().get();
                    // The step at depth first: the one at context 0 cuts the computed context off.
                    KernelTimings.Profile atDepth = depth > 0 && tg > 0 ? sequence.profile(timings, depth) : null;
                    printProfile(
                            io,
                            "GPU time per kernel, one decode step at context 0:",
                            LEFT_OUT,
                            sequence.profile(timings, 0),
                            1);
                    if (atDepth != null) {
                        printProfile(
                                io,
                                "GPU time per kernel, one decode step at context " + depth + ":",
                                LEFT_OUT,
                                atDepth,
                                1);
                    }
                    if (pp > 0) {
                        int n = Math.min(pp, timings.promptBatch());
                        sequence.sequence.truncate(0);
                        printProfile(
                                io,
                                "GPU time per kernel, one prompt batch of " + n + " tokens into an empty cache:",
                                "each dispatch timed between events",
                                timings.profilePrompt(sequence.sequence, tokens, 0, n),
                                n);
                    }
                }
                if (!batches.isEmpty()) {
                    batchDecode(io, choice, batches, tg, depth, reps, tokens);
                }
                if (drafts > 0) {
                    BackendChoice drafting = backends.choose(
                            requested,
                            model,
                            new Backends.CpuOptions(threads, KvCacheType.DEFAULT, cpuOptions.promptBatch(), drafts));
                    try (drafting) {
                        new DraftBench(io, model, choice, drafting, drafts, depth, tg, tokens[0])
                                .run(reps, draftAccepts);
                    }
                }
                io.out().printf(Locale.ROOT, "pp_tok_s=%.2f tg_tok_s=%.2f%n", ppRate, tgRate);
            } finally {
                choice.close();
            }
        }
        return 0;
    }

    /**
     * The CPU backend's time per kind of operation over {@code units} prompts or decode steps that took
     * {@code seconds} in all (one entry per repetition): milliseconds per unit, share of the time, the
     * weight bytes each kind streamed and the multiply-adds it did per second of its own time; "other" is the rest of the forward
     * pass (norms, RoPE, the router's softmax, embeddings, logits copies).
     */
    private static void printCpuProfile(Terminal io, String title, CpuProfile profile, long units, double[] seconds) {
        double total = java.util.stream.DoubleStream.of(seconds).sum();
        double counted = 0;
        io.out().println(title);
        io.out()
                .printf(
                        Locale.ROOT,
                        "  %-24s %10s %7s %8s %13s %8s%n",
                        "operation",
                        "ms",
                        "share",
                        "calls",
                        "weights GB/s",
                        "GMAC/s");
        for (CpuProfile.Op op : CpuProfile.Op.values()) {
            double s = profile.seconds(op);
            counted += s;
            io.out()
                    .printf(
                            Locale.ROOT,
                            "  %-24s %10.3f %6.1f%% %8d %13s %8s%n",
                            op.label(),
                            1000 * s / units,
                            100 * s / total,
                            profile.calls(op) / units,
                            perSecond(profile.weightBytes(op), s),
                            perSecond(profile.multiplyAdds(op), s));
        }
        io.out()
                .printf(
                        Locale.ROOT,
                        "  %-24s %10.3f %6.1f%%%n",
                        "other",
                        1000 * (total - counted) / units,
                        100 * (total - counted) / total);
    }

    /** {@code count} per second in billions, one decimal, or nothing when there is no count. */
    private static String perSecond(long count, double seconds) {
        return count == 0 ? "" : String.format(Locale.ROOT, "%.1f", count / seconds / 1e9);
    }

    /** Tokens of each conversation's prompt before a batch decode (llama-batched-bench's -npp). */
    private static final int BATCH_PROMPT = 16;

    /**
     * Aggregate decode of n conversations stepping together, for each n of {@code batches}: a pool of the largest n,
     * each conversation after its own prompt of {@link #BATCH_PROMPT} tokens (and {@code depth} more), then
     * {@code tg} steps of all n; tok/s = n x tg / time, median over {@code reps}; then one step's profile.
     */
    private static void batchDecode(
            Terminal io, BackendChoice choice, List<Integer> batches, int tg, int depth, int reps, int[] seed) {
        int most = batches.stream().mapToInt(Integer::intValue).max().orElseThrow();
        int start = BATCH_PROMPT + depth;
        Random random = new Random(7);
        try (SequencePool pool = choice.pool(most, start + tg + 1)) {
            List<SequencePool.Sequence> all = new ArrayList<>();
            try {
                for (int i = 0; i < most; i++) {
                    SequencePool.Sequence d = pool.open();
                    all.add(d);
                    int[] prompt = new int[start];
                    for (int t = 0; t < start; t++) {
                        prompt[t] = seed[random.nextInt(seed.length)];
                    }
                    pool.prompt(d, prompt, 0, prompt.length, SequencePool.Readout.GREEDY);
                }
                for (int n : batches) {
                    List<SequencePool.Sequence> running = all.subList(0, n);
                    SequencePool.Readout[] greedy = new SequencePool.Readout[n];
                    Arrays.fill(greedy, SequencePool.Readout.GREEDY);
                    double[] rates = new double[reps];
                    for (int r = -1; r < reps; r++) { // r = -1: warm-up
                        running.forEach(d -> d.truncate(start));
                        int[] tokens = new int[n];
                        for (int i = 0; i < n; i++) {
                            tokens[i] = seed[i % seed.length];
                        }
                        int[] left = new int[n];
                        Arrays.fill(left, r < 0 ? 2 : tg);
                        long t0 = System.nanoTime();
                        pool.decode(
                                running,
                                tokens,
                                greedy,
                                (row, next) -> --left[row] > 0 ? next.greedyToken() : SequencePool.STOP);
                        if (r >= 0) {
                            rates[r] = (double) n * tg / ((System.nanoTime() - t0) / 1e9);
                        }
                    }
                    report(io, "tg" + tg + " x " + n + " conversations (aggregate)", rates);
                    running.forEach(d -> d.truncate(start));
                    int[] tokens = new int[n];
                    pool.timings()
                            .ifPresent(timings -> printProfile(
                                    io,
                                    "GPU time per kernel, one decode step of " + n + " conversations at context "
                                            + start + ":",
                                    LEFT_OUT,
                                    timings.profileStep(running, tokens),
                                    n));
                }
            } finally {
                all.forEach(SequencePool.Sequence::close);
            }
        }
    }

    /**
     * One sequence of a pool of the chosen backend, measured as the server runs it: a prompt into an empty cache, then
     * decode steps after some context, each as for a greedy request (on a GPU only the greedy token is read back). On
     * the CPU that context is random cache rows rather than computed ones (the cost of attention depends only on their
     * number), so a long context is quick to set up; on a GPU it is a prompt run once, cut back to before every
     * repetition.
     */
    private static final class Measured implements AutoCloseable {
        private static final SequencePool.Readout[] GREEDY = {SequencePool.Readout.GREEDY};
        final SequencePool pool;
        final SequencePool.Sequence sequence;

        Measured(SequencePool pool) {
            this.pool = pool;
            this.sequence = pool.open();
        }

        /** The CPU backend that computes, or null on a GPU. */
        CpuBackend cpu() {
            return pool instanceof CpuSequencePool cpu && cpu.backend() instanceof CpuBackend backend ? backend : null;
        }

        /** Tokens per second of one prompt of {@code n} tokens into an empty cache. */
        double prompt(int[] tokens, int n) {
            sequence.truncate(0);
            long start = System.nanoTime();
            pool.prompt(sequence, tokens, 0, n, SequencePool.Readout.LOGITS);
            return n / ((System.nanoTime() - start) / 1e9);
        }

        /** Puts {@code depth} positions of context in the cache, for {@link #decode}. */
        void fillContext(int depth, Random random) {
            fillRandom(pool, sequence, depth, random);
        }

        /**
         * Tokens per second of {@code n} greedy decode steps after the first {@code depth} positions, from
         * {@code tokens[0]} on: each step fed the one before's greedy token, as a greedy request decodes (chained on the
         * device on a GPU).
         */
        double decode(int[] tokens, int n, int depth) {
            sequence.truncate(depth);
            int[] left = {n};
            long start = System.nanoTime();
            pool.decode(
                    List.of(sequence),
                    new int[] {tokens[0]},
                    GREEDY,
                    (row, next) -> --left[0] > 0 ? next.greedyToken() : SequencePool.STOP);
            return n / ((System.nanoTime() - start) / 1e9);
        }

        /** One profiled step after the first {@code depth} positions (which {@link #fillContext} filled). */
        KernelTimings.Profile profile(KernelTimings timings, int depth) {
            sequence.truncate(depth);
            return timings.profileStep(List.of(sequence), new int[] {1});
        }

        /** What the pool holds in memory, for the memory line. */
        String memory(boolean host) {
            return String.format(
                    Locale.ROOT, host ? "cache %.2f GB" : "the pool holds %.2f GB on the device", pool.bytes() / 1e9);
        }

        @Override
        public void close() {
            sequence.close();
            pool.close();
        }
    }

    /**
     * Gives {@code sequence} {@code depth} positions of random KV rows rather than computing them (llama-bench's
     * {@code -d} computes its context): a decode step's cost does not depend on the values, and computing a long
     * context (202,752 positions on a GPU) would take longer than the bench. The CPU's cache is filled in place; other pools
     * import the rows as the KV tiers do ({@link SequencePool#importPrefix}), random halves in every two bytes (valid
     * numbers in any of the KV layouts: F16, F32 and Q8_0 read them as finite values).
     */
    static void fillRandom(SequencePool pool, SequencePool.Sequence sequence, int depth, Random random) {
        if (pool instanceof CpuSequencePool cpu) {
            cpu.fillRandom(sequence, depth, random);
            return;
        }
        sequence.truncate(0);
        if (depth == 0) {
            return;
        }
        long bytes = depth * pool.bytesPerPosition();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment rows = arena.allocate(bytes, 8);
            // one block of random halves, repeated: filling gigabytes value by value would outlast the bench
            long block = Math.min(bytes, 16L << 20) & ~1L;
            for (long at = 0; at < block; at += 2) {
                rows.set(ValueLayout.JAVA_SHORT_UNALIGNED, at, Float.floatToFloat16((float) random.nextGaussian()));
            }
            for (long at = block; at < bytes; at += block) {
                MemorySegment.copy(rows, 0, rows, at, Math.min(block, bytes - at));
            }
            pool.importPrefix(sequence, rows, depth);
        }
    }

    /** How KernelTimings times a decode step's kinds of kernel (a prompt batch's are timed dispatch by dispatch). */
    private static final String LEFT_OUT = "each kind timed by leaving it out of the graph";

    /**
     * A profile of a run of {@code tokens} tokens, timed as {@code method} says, as a table: kernel, dispatches,
     * milliseconds, share of the step, weight bytes, their GB/s and that as a share of the device's copy bandwidth,
     * and the TFLOP/s of the kernels that multiply weight matrices; then the kinds' sum against the measured step.
     */
    private static void printProfile(
            Terminal io, String title, String method, KernelTimings.Profile profile, int tokens) {
        double step = profile.stepMillis();
        double copy = profile.copyGigabytesPerSecond();
        io.out().println(title + String.format(Locale.ROOT, " (%s; device copy bandwidth %.0f GB/s)", method, copy));
        io.out()
                .printf(
                        Locale.ROOT,
                        "  %-28s %10s %9s %6s %9s %8s %6s %8s%n",
                        "kernel",
                        "dispatches",
                        "ms",
                        "share",
                        "weight MB",
                        "GB/s",
                        "of copy",
                        "TFLOP/s");
        for (KernelTimings.KernelTime t : profile.kernels()) {
            io.out()
                    .printf(
                            Locale.ROOT,
                            "  %-28s %10d %9.3f %5.1f%% %9.1f %8.1f %5.0f%% %8s%n",
                            t.kernel(),
                            t.dispatches(),
                            t.millis(),
                            100 * t.millis() / step,
                            t.weightBytes() / 1e6,
                            t.gigabytesPerSecond(),
                            copy > 0 ? 100 * t.gigabytesPerSecond() / copy : 0,
                            t.multiplyAdds() > 0 ? String.format(Locale.ROOT, "%.2f", t.teraflopsPerSecond()) : "-");
        }
        io.out()
                .printf(
                        Locale.ROOT,
                        "  %-28s %10s %9.3f %5.1f%% of the measured step%n",
                        "sum of the kinds",
                        "",
                        profile.kernelMillis(),
                        100 * profile.kernelMillis() / step);
        io.out()
                .printf(
                        Locale.ROOT,
                        "  %-28s %10s %9.3f (%.0f tok/s)%n",
                        "measured step (one graph)",
                        "",
                        step,
                        1000 * tokens / step);
        if (!Double.isNaN(profile.stepWithCopiesMillis())) {
            double withCopies = profile.stepWithCopiesMillis();
            io.out()
                    .printf(
                            Locale.ROOT,
                            "  %-28s %10s %9.3f (%.0f tok/s: the device's part of a decode step)%n",
                            "with the copies between",
                            "",
                            withCopies,
                            1000 * tokens / withCopies);
        }
    }

    /** mlock(2) on the mapping: reads it all in and keeps it resident until the process ends. */
    private static void lock(MemorySegment mapping) {
        Linker linker = Linker.nativeLinker();
        MethodHandle mlock = linker.downcallHandle(
                linker.defaultLookup().find("mlock").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG));
        int rc;
        try {
            rc = (int) mlock.invokeExact(mapping, mapping.byteSize());
        } catch (Throwable e) {
            throw new IllegalStateException("mlock failed", e);
        }
        if (rc != 0) {
            throw new InvalidInputException("cannot lock " + mapping.byteSize() / 1_000_000
                    + " MB in RAM (mlock failed:" + " not enough memory, or no permission to lock that much)");
        }
    }

    /** The middle value of {@code values} (the mean of the two middle ones for an even count). */
    private static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        int n = sorted.length;
        return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    }

    private static double report(Terminal io, String test, double[] rates) {
        double[] sorted = rates.clone();
        Arrays.sort(sorted);
        double median = median(rates);
        io.out()
                .printf(
                        Locale.ROOT,
                        "%-14s %8.2f tok/s (min %.2f, max %.2f over %d)%n",
                        test,
                        median,
                        sorted[0],
                        sorted[sorted.length - 1],
                        sorted.length);
        return median;
    }

    private static String weightTypes(List<TensorInfo> tensors) {
        Map<String, Long> count = new TreeMap<>(
                tensors.stream().collect(Collectors.groupingBy(t -> t.type().ggmlName(), Collectors.counting())));
        return count.entrySet().stream()
                .map(e -> e.getValue() + " " + e.getKey())
                .collect(Collectors.joining(", "));
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

    /**
     * Greedy decode with drafts against decode without, in one run ({@code --draft mtp}): generations of {@code tg}
     * tokens from one token after {@code depth} positions of context, through {@link Generator} as {@code generate}
     * runs them, alternating a plain run and a run per acceptance A in every repetition (the medians then compare
     * runs that saw the same load). A run at A replaces each draft by the token the plain run put there with
     * probability A, by another otherwise; its output must be the plain run's, which each run checks.
     */
    private static final class DraftBench {
        private final Terminal io;
        private final GlmModel model;
        private final BackendChoice plainChoice;
        private final BackendChoice draftingChoice;
        private final int drafts;
        private final int depth;
        private final int tg;
        private final int first;
        private int[] reference;

        DraftBench(
                Terminal io,
                GlmModel model,
                BackendChoice plainChoice,
                BackendChoice draftingChoice,
                int drafts,
                int depth,
                int tg,
                int first) {
            this.io = io;
            this.model = model;
            this.plainChoice = plainChoice;
            this.draftingChoice = draftingChoice;
            this.drafts = drafts;
            this.depth = depth;
            this.tg = tg;
            this.first = first;
        }

        /** What one generation gave: its speed and its drafts. */
        private record Run(double tokensPerSecond, GenerationResult.Drafts drafts) {}

        void run(int reps, List<Double> accepts) {
            int contextSize = depth + tg + 1 + drafts;
            try (SequencePool plain = plainChoice.pool(1, contextSize);
                    SequencePool drafting = draftingChoice.pool(1, contextSize)) {
                DraftOptions.requireDrafting(drafting, drafts, draftingChoice.name());
                // Warm-up (and the reference tokens): one plain run, one run with drafts.
                generate(plain, 0, -1, Drafting.Use.ALWAYS);
                generate(drafting, drafts, 0.5, Drafting.Use.ALWAYS);
                double[] plainRates = new double[reps];
                // The rows: each A, the drafter's own drafts (on random weights rarely right), and A = 0 with the
                // generator drafting only while that pays (generate and serve: it should stop drafting).
                int rows = accepts.size() + 2;
                double[][] rates = new double[rows][reps];
                double[][] acceptance = new double[rows][reps];
                for (int r = 0; r < reps; r++) {
                    plainRates[r] = generate(plain, 0, -1, Drafting.Use.ALWAYS).tokensPerSecond();
                    for (int row = 0; row < rows; row++) {
                        Run run = row < accepts.size()
                                ? generate(drafting, drafts, accepts.get(row), Drafting.Use.ALWAYS)
                                : row == accepts.size()
                                        ? generate(drafting, drafts, -1, Drafting.Use.ALWAYS)
                                        : generate(drafting, drafts, 0, Drafting.Use.WHILE_PAYING);
                        rates[row][r] = run.tokensPerSecond();
                        acceptance[row][r] = run.drafts().acceptance();
                    }
                }
                io.out()
                        .printf(
                                Locale.ROOT,
                                "draft mtp, %d per step: tg%d%s, greedy, as generate runs it; median of %d runs,"
                                        + " alternating%n",
                                drafts,
                                tg,
                                depth > 0 ? " @ ctx " + depth : "",
                                reps);
                double base = median(plainRates);
                io.out().printf(Locale.ROOT, "  %-28s %8.2f tok/s%n", "no drafts", base);
                for (int row = 0; row < rows; row++) {
                    double rate = median(rates[row]);
                    String label = row < accepts.size()
                            ? String.format(Locale.ROOT, "A = %.2f", accepts.get(row))
                            : row == accepts.size() ? "the drafter's own drafts" : "A = 0.00, drafts while paying";
                    io.out()
                            .printf(
                                    Locale.ROOT,
                                    "  %-28s %8.2f tok/s  %.2fx  (accepted %.0f %%)%n",
                                    label,
                                    rate,
                                    rate / base,
                                    100 * median(acceptance[row]));
                }
            }
        }

        /**
         * One generation of {@code tg} tokens after the context; with drafts, each replaced by the reference token
         * with probability {@code accept} ({@code -1}: the drafter's own), drafting as {@code use} says. The first
         * plain run sets the reference.
         */
        private Run generate(SequencePool pool, int drafts, double accept, Drafting.Use use) {
            try (SequencePool.Sequence sequence = pool.open()) {
                fillRandom(pool, sequence, depth, new Random(42));
                // drafts replaced by the reference's token (from the position of the first generated token on)
                SequencePool.DraftFilter filter = accept < 0
                        ? SequencePool.DraftFilter.NONE
                        : SequencePool.DraftFilter.towards(
                                reference, depth + 1, accept, new Random(7), model.vocabSize());
                Generator generator =
                        new Generator(pool, sequence, ANY_TOKEN, model.vocabSize(), 1, drafts, filter, use);
                GenerationResult result = generator.generate(
                        new GenerationRequest(new int[] {first}, SamplingParams.greedy(), tg, List.of(), false),
                        event -> {},
                        () -> false);
                if (reference == null) {
                    reference = result.tokens();
                } else if (!Arrays.equals(reference, result.tokens())) {
                    throw new IllegalStateException("decode with " + drafts + " drafts gave other tokens than"
                            + " without: " + Arrays.toString(result.tokens()) + " vs " + Arrays.toString(reference));
                }
                return new Run(result.timings().tokensPerSecond(), result.drafts());
            }
        }
    }

    /** Tokens without text that never end a generation: a bench decodes exactly --tg tokens. */
    private static final Vocabulary ANY_TOKEN = new Vocabulary() {
        @Override
        public boolean isEndOfGeneration(int token) {
            return false;
        }

        @Override
        public TextDecoder newDecoder() {
            return new TextDecoder() {
                @Override
                public String next(int id) {
                    return "";
                }

                @Override
                public String finish() {
                    return "";
                }
            };
        }
    };
}
