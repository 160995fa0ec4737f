package dev.glimmer.kernels.emulator;

import dev.glimmer.kernels.KernelLibrary;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Compiles the kernel library with clang-19 into the emulator's shared library, cached under
 * {@code target/emulator/} by a hash of everything that goes into it, and syntax-checks single
 * .metal files.
 */
public final class EmulatorBuild {

    static final String CLANG = "clang-19";
    private static final String RESOURCES = "/dev/glimmer/kernels/emulator/";
    /** MSL's char is signed (Q8_0 quants, Q6_K scales); so is the emulator's on every host (arm64 Linux defaults to unsigned). */
    private static final List<String> FLAGS = List.of(
            "-std=c++17",
            "-fsigned-char",
            "-Wall",
            "-Wno-unknown-attributes",
            "-Wno-unused-function",
            "-Wno-unused-variable",
            "-Wno-unused-but-set-variable");

    private static final List<String> LINK = List.of("-O2", "-shared", "-fPIC", "-lstdc++", "-lm");

    /** What to do when clang-19 is missing. */
    public static final String INSTALL_COMPILER =
            "install it, e.g. 'sudo apt-get install clang-19' (./glimmer test installs it)";

    private EmulatorBuild() {}

    /** Whether clang-19, which builds the emulator, can be started (it is on the PATH). */
    public static boolean compilerFound() {
        try {
            Process p = new ProcessBuilder(CLANG, "--version")
                    .redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD)
                    .start();
            return p.waitFor(1, TimeUnit.MINUTES) && p.exitValue() == 0;
        } catch (IOException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /** The shared library for {@code library}, built unless a build of the same sources exists. */
    public static Path sharedLibrary(KernelLibrary library, Path directory) {
        String prelude = KernelLibrary.resource(RESOURCES + "prelude.h");
        String runtime = KernelLibrary.resource(RESOURCES + "runtime.cpp");
        String unit = ThunkGenerator.translationUnit(library);
        String hash =
                sha256(String.join("\u0000", prelude, runtime, unit, String.join(" ", FLAGS), String.join(" ", LINK)));
        Path lib = directory.resolve("libglimmer-emulator-" + hash + ".so");
        if (Files.exists(lib)) {
            return lib;
        }
        try {
            Path src = Files.createDirectories(directory.resolve("src-" + hash));
            Files.writeString(src.resolve("prelude.h"), prelude);
            Files.writeString(src.resolve("runtime.cpp"), runtime);
            Files.writeString(src.resolve("kernels.cpp"), unit);
            Path tmp = directory.resolve("libglimmer-emulator-" + hash + ".so.tmp"
                    + ProcessHandle.current().pid());
            List<String> cmd = new ArrayList<>(List.of(CLANG));
            cmd.addAll(FLAGS);
            cmd.addAll(List.of(
                    "-I",
                    src.toString(),
                    src.resolve("kernels.cpp").toString(),
                    src.resolve("runtime.cpp").toString(),
                    "-o",
                    tmp.toString()));
            cmd.addAll(LINK);
            String errors = run(cmd);
            if (errors != null) {
                throw new IllegalStateException("building the kernel emulator failed:\n" + errors);
            }
            Files.move(tmp, lib, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            return lib;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * Compiles {@code file} (after the files it builds on) as the emulator would, without
     * generating code; returns clang's messages, or null when it compiles cleanly.
     */
    public static String syntaxCheck(
            List<KernelLibrary.SourceFile> prerequisites, KernelLibrary.SourceFile file, Path directory) {
        try {
            Path src = Files.createDirectories(directory.resolve("syntax"));
            Files.writeString(src.resolve("prelude.h"), KernelLibrary.resource(RESOURCES + "prelude.h"));
            List<KernelLibrary.SourceFile> all = new ArrayList<>(prerequisites);
            all.add(file);
            Path unit = src.resolve(file.name() + ".cpp");
            Files.writeString(unit, "#include \"prelude.h\"\n" + KernelLibrary.concatenate(all));
            List<String> cmd = new ArrayList<>(List.of(CLANG, "-fsyntax-only", "-Werror"));
            cmd.addAll(FLAGS);
            cmd.addAll(List.of("-I", src.toString(), unit.toString()));
            return run(cmd);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Runs a compiler command; null on success, else its output. */
    private static String run(List<String> cmd) throws IOException {
        Process p;
        try {
            p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        } catch (IOException e) {
            throw new IllegalStateException(CLANG + " was not found: " + INSTALL_COMPILER, e);
        }
        try {
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(10, TimeUnit.MINUTES)) {
                p.destroyForcibly();
                return CLANG + " did not finish in 10 minutes";
            }
            return p.exitValue() == 0 ? null : out;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            p.destroyForcibly();
            throw new IllegalStateException("interrupted while running " + CLANG, e);
        }
    }

    private static String sha256(String s) {
        try {
            byte[] d = MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8));
            return HexFormat.of().formatHex(d, 0, 12);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
