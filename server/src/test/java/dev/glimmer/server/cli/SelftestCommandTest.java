package dev.glimmer.server.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.backend.cuda.CudaDevice;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.DisabledOnOs;
import org.junit.jupiter.api.condition.OS;
import org.junit.jupiter.api.io.TempDir;

/** {@code ./glimmer selftest} where Metal cannot run (the passing run is SelfTestTest's, in the engine). */
@DisabledOnOs(OS.MAC)
class SelftestCommandTest {

    @Test
    void metalOffMacOsIsExitCode2WithTheReason() {
        MainTest.Result r = MainTest.run("selftest", "--backend", "metal");
        assertEquals(2, r.code(), r.err());
        assertTrue(r.err().contains("--backend metal: Metal needs macOS on Apple Silicon, this is Linux"), r.err());
        assertEquals("", r.out());
    }

    @Test
    void anUnknownBackendIsAUsageError() {
        MainTest.Result r = MainTest.run("selftest", "--backend", "vulkan");
        assertEquals(2, r.code(), r.err());
        assertTrue(r.err().contains("--backend must be one of auto, metal, cuda, emulated, got vulkan"), r.err());
    }

    /**
     * Without clang-19 (a PATH without it, in a JVM of its own) the emulated self-test, what {@code selftest} runs
     * without Metal or an NVIDIA GPU, cannot be built: one line saying what to install, exit 2, before anything runs.
     */
    @Test
    void withoutClangTheEmulatedSelfTestIsOneLineAndExit2(@TempDir Path emptyPath) throws Exception {
        Assumptions.assumeTrue(CudaDevice.probe().device().isEmpty(), "a CUDA device is present: auto would test it");
        ProcessBuilder builder = new ProcessBuilder(
                        Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                        "--add-modules",
                        "jdk.incubator.vector",
                        "--enable-native-access=ALL-UNNAMED",
                        "-Xmx256m",
                        "-cp",
                        System.getProperty("java.class.path"),
                        Main.class.getName(),
                        "selftest")
                .redirectOutput(ProcessBuilder.Redirect.DISCARD);
        builder.environment().put("PATH", emptyPath.toString());
        Process process = builder.start();
        String stderr = new String(process.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(process.waitFor(60, TimeUnit.SECONDS), stderr);
        assertEquals(2, process.exitValue(), stderr);
        // The JVM's own note on the incubator module is the launcher's to filter (LauncherTest).
        List<String> lines = stderr.lines()
                .filter(l -> !l.startsWith("WARNING: Using incubator modules"))
                .toList();
        assertEquals(
                List.of("glimmer selftest: the emulated self-test (the GPU kernels run on the CPU, what selftest"
                        + " runs without Metal or an NVIDIA GPU) needs clang-19, which is not on the PATH: install it, e.g."
                        + " 'sudo apt-get install clang-19' (./glimmer test installs it)"),
                lines);
    }

    @Test
    void cudaWithoutADeviceIsExitCode2WithTheReason() {
        Assumptions.assumeTrue(
                CudaDevice.probe().device().isEmpty(),
                "a CUDA device is present: the passing run is CudaBackendTest's, in the engine");
        MainTest.Result r = MainTest.run("selftest", "--backend", "cuda");
        assertEquals(2, r.code(), r.err());
        assertTrue(r.err().contains("--backend cuda: " + CudaDevice.probe().reason()), r.err());
    }
}
