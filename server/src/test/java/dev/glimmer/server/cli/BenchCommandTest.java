package dev.glimmer.server.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.choice.BackendChoice;
import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.backend.cuda.CudaDevice;
import dev.glimmer.engine.backend.emulated.EmulatorRunner;
import dev.glimmer.engine.backend.metal.MetalPlatform;
import dev.glimmer.engine.synth.ModelSynthesizer;
import dev.glimmer.engine.synth.SynthModel;
import dev.glimmer.engine.synth.SynthPreset;
import dev.glimmer.engine.synth.SynthWeightType;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code ./glimmer bench} on the tiny Q4_0 oracle model: the report and its last line for scripts, on
 * the CPU and on a GPU-style pool (the GPU command lists on the kernel emulator), the batch decode of several
 * conversations on the CPU, and the backend choice.
 */
class BenchCommandTest {
    private static final String MODEL =
            LogitsCommandTest.ORACLE.resolve("tiny-q4_0.gguf").toString();

    @Test
    void reportsPromptAndDecodeRatesWithAScriptLine() {
        MainTest.Result r = MainTest.run(
                "bench",
                "--model",
                MODEL,
                "--pp",
                "8",
                "--tg",
                "4",
                "--reps",
                "2",
                "--threads",
                "2",
                "--bandwidth",
                "20",
                "--ctx",
                "16");
        assertEquals(0, r.code(), r.err());
        List<String> lines = r.out().strip().lines().toList();
        Matcher last =
                Pattern.compile("pp_tok_s=(\\d+\\.\\d+) tg_tok_s=(\\d+\\.\\d+)").matcher(lines.getLast());
        assertTrue(last.matches(), lines.getLast());
        assertTrue(Double.parseDouble(last.group(1)) > 0 && Double.parseDouble(last.group(2)) > 0, lines.getLast());
        assertTrue(r.out().contains("weights: "), r.out());
        assertTrue(r.out().contains("q4_0"), r.out());
        assertTrue(r.out().contains("threads: 2, " + new CpuBackend(1).kernels() + "; load: "), r.out());
        // The CPU backend's time per kind of operation, for the prompt and for decode.
        assertTrue(r.out().contains("CPU time per operation, one prompt of 8 tokens:"), r.out());
        assertTrue(r.out().contains("CPU time per operation, one decode step:"), r.out());
        assertTrue(
                r.out()
                        .lines()
                        .anyMatch(
                                l -> l.matches(
                                        "\\s+experts gate\\+up\\s+\\d+\\.\\d+\\s+\\d+\\.\\d%\\s+\\d+\\s+\\d+\\.\\d\\s+\\d+\\.\\d")),
                r.out());
        assertTrue(r.out().contains("tg4 @ ctx 16"), r.out());
        assertTrue(r.out().contains("% of the 20.0 GB/s limit"), r.out());
        assertTrue(r.out().contains("peak memory beyond the mapped file: "), r.out());
    }

    @Test
    void onlyDecodeWhenPromptIsZero() {
        MainTest.Result r = MainTest.run("bench", "--model", MODEL, "--pp", "0", "--tg", "2", "--reps", "1");
        assertEquals(0, r.code(), r.err());
        assertTrue(r.out().strip().lines().toList().getLast().startsWith("pp_tok_s=NaN tg_tok_s="), r.out());
    }

    @Test
    void badOptionsAreOneLineUsageErrors() {
        for (String[] args : new String[][] {
            {"--pp", "0", "--tg", "0"}, {"--reps", "0"}, {"--backend", "metal-x"}, {"--threads", "0"}
        }) {
            String[] argv = new String[3 + args.length];
            argv[0] = "bench";
            argv[1] = "--model";
            argv[2] = MODEL;
            System.arraycopy(args, 0, argv, 3, args.length);
            MainTest.Result r = MainTest.run(argv);
            assertEquals(2, r.code(), String.join(" ", args) + ": " + r.err());
            assertEquals(1, r.err().strip().lines().count(), r.err());
        }
    }

    @Test
    void autoWithoutAGpuMeasuresTheCpuAndSaysWhy() {
        Assumptions.assumeTrue(
                CudaDevice.probe().device().isEmpty() && !MetalPlatform.isMacArm64(),
                "a GPU is present: auto measures it");
        MainTest.Result r =
                MainTest.run("bench", "--model", MODEL, "--pp", "4", "--tg", "2", "--reps", "1", "--backend", "auto");
        assertEquals(0, r.code(), r.err());
        assertTrue(r.out().contains("backend: cpu, threads: "), r.out());
        assertEquals(
                "glimmer bench: measuring cpu: auto: Metal needs macOS on Apple Silicon, this is "
                        + System.getProperty("os.name") + "/" + System.getProperty("os.arch") + "; CUDA: "
                        + CudaDevice.probe().reason(),
                r.err().strip());
    }

    @Test
    void cudaWithoutADeviceIsAOneLineError() {
        Assumptions.assumeTrue(CudaDevice.probe().device().isEmpty(), "a CUDA device is present: bench measures it");
        MainTest.Result r = MainTest.run("bench", "--model", MODEL, "--backend", "cuda");
        assertEquals(2, r.code(), r.err());
        assertEquals(
                "glimmer bench: --backend cuda: " + CudaDevice.probe().reason(),
                r.err().strip());
    }

    /**
     * --draft mtp on a tiny model with the NextN block: greedy decode with drafts at each chosen acceptance (and the
     * drafter's own) against decode without, the tokens checked to be the same.
     */
    @Test
    void draftMtpMeasuresDecodeAtEachAcceptance(@TempDir Path dir) throws Exception {
        Path model = dir.resolve("tiny-mtp.gguf");
        ModelSynthesizer.write(SynthModel.of(SynthPreset.TINY, SynthWeightType.Q4_0, 3, true), model, (w, t) -> {});
        MainTest.Result r = MainTest.run(
                "bench",
                "--model",
                model.toString(),
                "--pp",
                "0",
                "--tg",
                "12",
                "--reps",
                "1",
                "--draft",
                "mtp",
                "--draft-tokens",
                "2",
                "--draft-accept",
                "0,1");
        assertEquals(0, r.code(), r.err());
        assertTrue(r.out().contains("draft mtp, 2 per step: tg12"), r.out());
        assertTrue(
                Pattern.compile("no drafts +\\d+\\.\\d+ tok/s").matcher(r.out()).find(), r.out());
        assertTrue(
                Pattern.compile("A = 0\\.00 +\\d+\\.\\d+ tok/s +\\d+\\.\\d+x +\\(accepted 0 %\\)")
                        .matcher(r.out())
                        .find(),
                r.out());
        assertTrue(r.out().contains("(accepted 100 %)"), r.out());
        assertTrue(r.out().contains("the drafter's own drafts"), r.out());

        MainTest.Result noBlock = MainTest.run("bench", "--model", MODEL, "--pp", "0", "--tg", "2", "--draft", "mtp");
        assertEquals(2, noBlock.code());
        assertTrue(noBlock.err().contains("has no NextN (MTP) block"), noBlock.err());
        MainTest.Result badAccept = MainTest.run(
                "bench", "--model", model.toString(), "--tg", "2", "--draft", "mtp", "--draft-accept", "1.5");
        assertEquals(2, badAccept.code());
        assertTrue(badAccept.err().contains("--draft-accept"), badAccept.err());
    }

    /** --batch on the CPU: the conversations step together through one batched forward pass, as the server runs them. */
    @Test
    void batchDecodeRunsOnTheCpu() {
        MainTest.Result r = MainTest.run(
                "bench", "--model", MODEL, "--pp", "0", "--tg", "2", "--reps", "1", "--threads", "2", "--batch", "1,3");
        assertEquals(0, r.code(), r.err());
        for (int n : new int[] {1, 3}) {
            Matcher rate = Pattern.compile("tg2 x " + n + " conversations \\(aggregate\\)\\s+(\\d+\\.\\d+) tok/s.*")
                    .matcher(r.out()
                            .lines()
                            .filter(l -> l.startsWith("tg2 x " + n + " "))
                            .findFirst()
                            .orElse(""));
            assertTrue(rate.matches(), r.out());
            assertTrue(Double.parseDouble(rate.group(1)) > 0, r.out());
        }
        assertTrue(r.err().isBlank(), r.err());
    }

    /**
     * A backend whose pools run the GPU command lists, here on the kernel emulator: the same report, the backend
     * named with its reason, the context computed by the pool.
     */
    @Test
    void aGpuPoolIsMeasuredAsTheServerRunsIt() throws Exception {
        BenchCommand bench = new BenchCommand((requested, model, cpu) -> new BackendChoice(
                BackendKind.EMULATED,
                "the GPU decode step on the CPU kernel emulator",
                Optional.empty(),
                EmulatorRunner.pools(model)));
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int code = Main.run(
                bench,
                new String[] {
                    "--model", MODEL, "--pp", "4", "--tg", "2", "--reps", "1", "--ctx", "3", "--backend", "auto"
                },
                new Terminal(
                        new PrintStream(out, true, StandardCharsets.UTF_8),
                        new PrintStream(err, true, StandardCharsets.UTF_8)));
        String report = out.toString(StandardCharsets.UTF_8);
        assertEquals(0, code, err.toString(StandardCharsets.UTF_8));
        assertTrue(
                report.contains("backend: emulated, the GPU decode step on the CPU kernel emulator; load: "), report);
        assertTrue(report.contains("tg2 @ ctx 3"), report);
        assertTrue(report.contains("(anonymous resident, sampled; the pool holds "), report);
        Matcher last = Pattern.compile("pp_tok_s=(\\d+\\.\\d+) tg_tok_s=(\\d+\\.\\d+)")
                .matcher(report.strip().lines().toList().getLast());
        assertTrue(last.matches(), report);
        assertTrue(Double.parseDouble(last.group(1)) > 0 && Double.parseDouble(last.group(2)) > 0, report);
        assertEquals(
                "glimmer bench: measuring emulated: the GPU decode step on the CPU kernel emulator",
                err.toString(StandardCharsets.UTF_8).strip());
    }
}
