package dev.glimmer.engine.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.glimmer.engine.model.WeightMatrix;
import dev.glimmer.engine.tensor.GgmlType;
import dev.glimmer.engine.tensor.Q4_0;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Arm variant of the native Q4_0 kernel ({@code q4_0_neon.c}, NEON with the dot-product instructions)
 * against the Java kernels, bit for bit, without an Arm machine: compiled with clang for
 * {@code aarch64-linux-gnu} (statically, against Debian's arm64 cross libc) together with a small
 * program ({@code src/test/c/q4_0_kernel_main.c}) and run under {@code qemu-aarch64}, on matrices with
 * whole groups of four blocks and 1 to 3 blocks more, for 1, 2 and 3 tokens.
 *
 * <p>{@code ./glimmer test} installs what it needs (clang-19, qemu-user, libc6-dev-arm64-cross,
 * libgcc-12-dev-arm64-cross, binutils-aarch64-linux-gnu); where they are missing the test is skipped.
 */
class NeonKernelTest {
    private static final Path SYSROOT = Path.of("/usr/aarch64-linux-gnu");
    private static final int ROWS = 9;

    @TempDir
    Path dir;

    @Test
    void neonKernelEqualsTheJavaKernelsBitForBit() throws Exception {
        String clang = firstOnPath("clang-19", "clang");
        String qemu = firstOnPath("qemu-aarch64", "qemu-aarch64-static");
        assumeTrue(
                clang != null && qemu != null && Files.isDirectory(SYSROOT.resolve("lib")),
                "no clang, qemu-aarch64 or arm64 cross libc here");
        Path program = dir.resolve("q4_0_kernel_main");
        run(List.of(
                clang,
                "--target=aarch64-linux-gnu",
                "-O3",
                "-std=c11",
                "-Wall",
                "-Werror",
                "-static",
                "-o",
                program.toString(),
                "src/main/c/cpu_variants.c",
                "src/main/c/q4_0_activations.c",
                "src/main/c/q4_0_neon.c",
                "src/test/c/q4_0_kernel_main.c"));
        Random random = new Random(31);
        CpuBackend java = new CpuBackend(1, (NativeKernels.Variant) null);
        for (int cols : new int[] {64, 192, 1024 + 96}) {
            WeightMatrix w = new WeightMatrix("w", GgmlType.Q4_0, rows(random, cols), ROWS, cols);
            for (int n = 1; n <= 3; n++) {
                float[] x = new float[n * cols];
                for (int i = 0; i < x.length; i++) {
                    x[i] = (float) (random.nextGaussian() * Math.pow(10, random.nextInt(5) - 2));
                }
                float[] expected = new float[n * ROWS];
                java.matmul(w, x, 0, cols, n, expected, 0, ROWS);
                assertArrayEquals(expected, neon(qemu, program, w, x, n), cols + " cols, " + n + " tokens");
            }
        }
    }

    /** The kernel's results under the emulator. */
    private float[] neon(String qemu, Path program, WeightMatrix w, float[] x, int n) throws Exception {
        int cols = w.cols();
        ByteBuffer in = ByteBuffer.allocate(12 + (int) (ROWS * w.rowBytes()) + 4 * x.length)
                .order(ByteOrder.LITTLE_ENDIAN);
        in.putInt(ROWS).putInt(cols).putInt(n);
        in.put(w.data().asSlice(0, ROWS * w.rowBytes()).asByteBuffer());
        for (float v : x) {
            in.putFloat(v);
        }
        Path input = dir.resolve("in");
        Path output = dir.resolve("out");
        Files.write(input, in.array());
        run(List.of(qemu, program.toString(), input.toString(), output.toString()));
        ByteBuffer out = ByteBuffer.wrap(Files.readAllBytes(output)).order(ByteOrder.LITTLE_ENDIAN);
        float[] result = new float[n * ROWS];
        out.asFloatBuffer().get(result);
        return result;
    }

    private static void run(List<String> command) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(120, TimeUnit.SECONDS), "timed out: " + command);
        assertEquals(0, p.exitValue(), String.join(" ", command) + "\n" + out);
    }

    private static String firstOnPath(String... names) {
        List<Path> path = new ArrayList<>();
        for (String d : System.getenv().getOrDefault("PATH", "").split(":")) {
            path.add(Path.of(d));
        }
        for (String name : names) {
            for (Path d : path) {
                if (Files.isExecutable(d.resolve(name))) {
                    return d.resolve(name).toString();
                }
            }
        }
        return null;
    }

    private static MemorySegment rows(Random random, int cols) {
        long rowBytes = GgmlType.Q4_0.rowBytes(cols);
        MemorySegment data = Arena.ofAuto().allocate(ROWS * rowBytes);
        float[] row = new float[cols];
        for (int r = 0; r < ROWS; r++) {
            for (int i = 0; i < cols; i++) {
                row[i] = (float) (random.nextGaussian() * Math.pow(10, random.nextInt(3) - 1));
            }
            MemorySegment.copy(MemorySegment.ofArray(Q4_0.quantizeRow(row, 0, cols)), 0, data, r * rowBytes, rowBytes);
        }
        return data;
    }
}
