package dev.glimmer.server.cli;

import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** {@code ./glimmer bench} on the tiny Q4_0 oracle model: the report and its last line for scripts. */
class BenchCommandTest {
    private static final String MODEL = LogitsCommandTest.ORACLE.resolve("tiny-q4_0.gguf").toString();

    @Test
    void reportsPromptAndDecodeRatesWithAScriptLine() {
        MainTest.Result r = MainTest.run("bench", "--model", MODEL, "--pp", "8", "--tg", "4", "--reps", "2",
                "--threads", "2", "--bandwidth", "20", "--ctx", "16");
        assertEquals(0, r.code(), r.err());
        List<String> lines = r.out().strip().lines().toList();
        Matcher last = Pattern.compile("pp_tok_s=(\\d+\\.\\d+) tg_tok_s=(\\d+\\.\\d+)").matcher(lines.getLast());
        assertTrue(last.matches(), lines.getLast());
        assertTrue(Double.parseDouble(last.group(1)) > 0 && Double.parseDouble(last.group(2)) > 0, lines.getLast());
        assertTrue(r.out().contains("weights: "), r.out());
        assertTrue(r.out().contains("q4_0"), r.out());
        assertTrue(r.out().contains("threads: 2; load: "), r.out());
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
                {"--pp", "0", "--tg", "0"}, {"--reps", "0"}, {"--backend", "metal-x"}, {"--threads", "0"}}) {
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
}
