package dev.glimmer.engine.backend.cuda;

import dev.glimmer.engine.model.GlmModel;

import java.io.PrintStream;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * Speed of the CUDA decode step on one model file, as llama-bench measures it: prompt processing
 * (pp, tokens per second over a prompt fed through the decode graph token by token), decode at an
 * empty context (tg) and decode after {@code depth} cached positions, each the median of
 * {@code reps} runs; then where a step's GPU time goes, per kernel, from CUDA events.
 *
 * <p>Decode at depth starts from {@link CudaDecoder#seek}: the attention reads every one of the
 * {@code depth} rows whatever they hold, so the time is that of a filled cache.
 */
public final class CudaBenchmark {

    /** Medians (and the smallest and largest run) in tokens per second. */
    public record Rate(double median, double min, double max) {
        static Rate of(double[] runs) {
            double[] s = runs.clone();
            Arrays.sort(s);
            return new Rate(s[s.length / 2], s[0], s[s.length - 1]);
        }

        @Override
        public String toString() {
            return String.format(Locale.ROOT, "%.1f tok/s (%.1f .. %.1f)", median, min, max);
        }
    }

    /** Everything measured. */
    public record Result(String device, double loadSeconds, long gpuBytes, long weightBytesPerToken, Rate pp, Rate tg,
                         Rate tgAtDepth, int depth, List<CudaDecoder.KernelTime> profileAtZero,
                         List<CudaDecoder.KernelTime> profileAtDepth) {
    }

    private CudaBenchmark() {
    }

    public static Result run(Path modelPath, int promptTokens, int decodeTokens, int depth, int reps, PrintStream log)
            throws java.io.IOException {
        CudaDevice device = CudaDevice.probe().device()
                .orElseThrow(() -> new CudaException("no CUDA device: " + CudaDevice.probe().reason()));
        try (GlmModel model = GlmModel.open(modelPath)) {
            long t0 = System.nanoTime();
            CudaKernels kernels = CudaKernels.load(device);
            log.printf(Locale.ROOT, "kernels %s in %.1f s%n", kernels.fromCache() ? "from the cache" : "compiled by NVRTC",
                    (System.nanoTime() - t0) / 1e9);
            long before = device.memoryUsed();
            int context = Math.max(promptTokens, depth + decodeTokens) + 1;
            long fileBytes = model.file().mapping().byteSize();
            long[] next = {0};
            try (CudaWeights weights = new CudaWeights(model, kernels, bytes -> {
                if (bytes >= next[0]) {
                    log.printf(Locale.ROOT, "uploading weights: %.1f / %.1f GB%n", bytes / 1e9, fileBytes / 1e9);
                    next[0] += 2_000_000_000L;
                }
            }); CudaDecoder decoder = new CudaDecoder(weights, context)) {
                double load = (System.nanoTime() - t0) / 1e9;
                long gpuBytes = device.memoryUsed() - before;
                log.printf(Locale.ROOT, "loaded in %.1f s; %.2f GB of GPU memory; %d dispatches per token%n", load,
                        gpuBytes / 1e9, decoder.commandList().dispatches().size());
                int vocab = model.vocabSize();
                // warm-up
                decoder.seek(0);
                for (int i = 0; i < 8; i++) {
                    decoder.stepGreedy(i % vocab);
                }
                double[] pp = new double[reps];
                double[] tg = new double[reps];
                double[] tgDepth = new double[reps];
                for (int r = 0; r < reps; r++) {
                    decoder.seek(0);
                    long s = System.nanoTime();
                    for (int i = 0; i < promptTokens; i++) {
                        decoder.stepGreedy((i * 7919 + r) % vocab);
                    }
                    pp[r] = promptTokens / ((System.nanoTime() - s) / 1e9);
                    tg[r] = decode(decoder, 0, decodeTokens, r);
                    tgDepth[r] = decode(decoder, depth, decodeTokens, r);
                    log.printf(Locale.ROOT, "rep %d: pp%d %.1f tok/s, tg%d %.1f tok/s, tg%d@%d %.1f tok/s%n", r, promptTokens,
                            pp[r], decodeTokens, tg[r], decodeTokens, depth, tgDepth[r]);
                }
                decoder.seek(0);
                List<CudaDecoder.KernelTime> atZero = decoder.profileStep(1);
                decoder.seek(depth);
                List<CudaDecoder.KernelTime> atDepth = decoder.profileStep(1);
                return new Result(device.name(), load, gpuBytes, decoder.commandList().weightBytesPerStep(), Rate.of(pp),
                        Rate.of(tg), Rate.of(tgDepth), depth, atZero, atDepth);
            }
        }
    }

    /** Tokens per second of {@code n} greedy steps after {@code start} cached positions, each token fed back. */
    private static double decode(CudaDecoder decoder, int start, int n, int seed) {
        decoder.seek(start);
        int token = seed + 1;
        long s = System.nanoTime();
        for (int i = 0; i < n; i++) {
            token = decoder.stepGreedy(token);
        }
        return n / ((System.nanoTime() - s) / 1e9);
    }

    /** Prints a profile as a table: kernel, dispatches, milliseconds, share of the step. */
    public static void printProfile(List<CudaDecoder.KernelTime> profile, PrintStream out) {
        double total = profile.stream().mapToDouble(CudaDecoder.KernelTime::millis).sum();
        out.printf(Locale.ROOT, "  %-28s %10s %9s %6s %9s %8s%n", "kernel", "dispatches", "ms", "share", "weight MB", "GB/s");
        for (CudaDecoder.KernelTime t : profile) {
            out.printf(Locale.ROOT, "  %-28s %10d %9.3f %5.1f%% %9.1f %8.1f%n", t.kernel(), t.dispatches(), t.millis(),
                    100 * t.millis() / total, t.weightBytes() / 1e6, t.gigabytesPerSecond());
        }
        out.printf(Locale.ROOT, "  %-28s %10s %9.3f (%.0f tok/s of kernel time alone)%n", "total", "", total, 1000 / total);
    }

    /** {@code CudaBenchmark MODEL [pp] [tg] [depth] [reps]}. */
    public static void main(String[] args) throws Exception {
        Path model = Path.of(args[0]);
        int pp = args.length > 1 ? Integer.parseInt(args[1]) : 512;
        int tg = args.length > 2 ? Integer.parseInt(args[2]) : 64;
        int depth = args.length > 3 ? Integer.parseInt(args[3]) : 4096;
        int reps = args.length > 4 ? Integer.parseInt(args[4]) : 3;
        Result r = run(model, pp, tg, depth, reps, System.err);
        PrintStream out = System.out;
        out.printf(Locale.ROOT, "device %s; load %.1f s; GPU memory %.2f GB; weights read per token %.2f GB%n", r.device(),
                r.loadSeconds(), r.gpuBytes() / 1e9, r.weightBytesPerToken() / 1e9);
        out.println("pp" + pp + ": " + r.pp());
        out.println("tg" + tg + ": " + r.tg());
        out.println("tg" + tg + " at depth " + depth + ": " + r.tgAtDepth());
        out.println("GPU time per kernel, one step at context 0:");
        printProfile(r.profileAtZero(), out);
        out.println("GPU time per kernel, one step at context " + depth + ":");
        printProfile(r.profileAtDepth(), out);
        out.printf(Locale.ROOT, "pp_tok_s=%.1f tg_tok_s=%.1f tg_depth_tok_s=%.1f%n", r.pp().median(), r.tg().median(),
                r.tgAtDepth().median());
    }
}
