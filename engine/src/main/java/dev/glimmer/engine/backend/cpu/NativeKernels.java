package dev.glimmer.engine.backend.cpu;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.tensor.GgmlType;
import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * The optional native CPU kernels ({@code engine/src/main/c}): Q4_0 weight rows times Q8_0 activation
 * rows, and on x86-64 Q4_K, Q5_K, Q6_K and Q5_0 weight rows times Q8_K (Q8_0) activation rows, with integer dot products, which the Vector API cannot emit (it has no integer dot product),
 * called through the FFM API. One library holds a {@link Variant} per instruction set; the best one this
 * processor runs is chosen at start-up, unless {@code GLIMMER_CPU_KERNELS} (or the system property
 * {@code glimmer.cpu.kernels}) says {@code java} or names a variant ({@code auto}, the default, chooses).
 *
 * <p>It is an accelerator, never a requirement: the build compiles it when a C compiler is there
 * ({@code engine/build-native.sh}), and it is used only where the library loads and the processor has
 * the instructions; everywhere else the Java kernels ({@link Kernels}) run. Every variant's results are
 * the Java kernel's bit for bit (same integer lanes, same double sums in the same order), so the choice
 * never changes a logit.
 *
 * <p>The downcalls are "critical" (no thread-state transition, heap arrays passed in place): each
 * lasts microseconds and must not allocate, as the decode path allocates nothing once warm.
 */
final class NativeKernels {
    /** The environment variable, and the system property, that choose the kernels. */
    static final String SETTING_ENV = "GLIMMER_CPU_KERNELS";

    static final String SETTING_PROPERTY = "glimmer.cpu.kernels";

    /** The variants of the native Q4_0 kernel, best first; bit {@code ordinal()} of {@code glimmer_cpu_variants()}. */
    enum Variant {
        AVX512_VNNI("avx512-vnni", "AVX-512 VNNI"),
        AVX_VNNI("avx-vnni", "AVX-VNNI"),
        AVX2("avx2", "AVX2"),
        NEON_DOTPROD("neon-dotprod", "NEON dot product");

        /** The name {@code GLIMMER_CPU_KERNELS} takes. */
        final String setting;
        /** The instruction set, as {@code bench} prints it. */
        final String instructions;

        Variant(String setting, String instructions) {
            this.setting = setting;
            this.instructions = instructions;
        }

        /** The library's function for this variant: {@code glimmer_q4_0_matmul_avx512_vnni} and so on. */
        String matmulSymbol() {
            return "glimmer_q4_0_matmul_" + setting.replace('-', '_');
        }

        /**
         * The library's matmul of this variant for one of {@link #TYPED}: {@code glimmer_q4_K_matmul_avx2} and so
         * on (x86-64 only).
         */
        String typedSymbol(GgmlType type) {
            String name = type.name().toLowerCase(Locale.ROOT).replace("_k", "_K");
            return "glimmer_" + name + "_matmul_" + setting.replace('-', '_');
        }
    }

    /** Where the build puts the library inside the engine's classes, for this machine's architecture. */
    static final String RESOURCE = "/native/linux-" + architecture() + "/libglimmer-cpu.so";

    /** Each variant's downcall, where this processor runs it (null elsewhere). */
    private static final MethodHandle[] MATMUL = new MethodHandle[Variant.values().length];

    /**
     * The weight types besides Q4_0 with native kernels on x86-64, whose activations are int8 quants with a
     * float scale per block (Q8_K, and for Q5_0 Q8_0) as the Java quantizer rounds them ({@link #typedMatmul}).
     */
    static final List<GgmlType> TYPED = List.of(GgmlType.Q4_K, GgmlType.Q5_K, GgmlType.Q6_K, GgmlType.Q5_0);

    /**
     * Each variant's matmuls of the {@link #TYPED} types (a range of weight rows · several activation rows),
     * {@code TYPED_MATMUL[variant][index in TYPED]}, where this processor runs the variant and the library has
     * them all (null elsewhere: the Java kernels compute those).
     */
    private static final MethodHandle[][] TYPED_MATMUL = new MethodHandle[Variant.values().length][];

    private static final MethodHandle Q4_0_ACTIVATIONS;
    /** The variant the setting chooses here, or null for the Java kernels. */
    private static final Variant CHOSEN;
    /** Why the Java kernels run by default (null when a variant is chosen), or why the setting is wrong. */
    private static final String WHY_JAVA;

    private static final boolean SETTING_VALID;

    static {
        String setting = System.getProperty(SETTING_PROPERTY, System.getenv().getOrDefault(SETTING_ENV, "auto"))
                .trim();
        MethodHandle activations = null;
        String whyNot = null;
        Variant chosen = null;
        boolean valid = true;
        Variant named = null;
        for (Variant v : Variant.values()) {
            if (v.setting.equals(setting)) {
                named = v;
            }
        }
        if (named == null && !setting.equals("auto") && !setting.equals("java")) {
            valid = false;
            whyNot = SETTING_ENV + "=" + setting + " is not one of auto, java, "
                    + String.join(
                            ", ",
                            Arrays.stream(Variant.values()).map(v -> v.setting).toList());
        } else if (setting.equals("java")) {
            whyNot = SETTING_ENV + "=java";
        } else {
            try {
                whyNot = unavailableReason();
                if (whyNot == null) {
                    Path library = extract();
                    SymbolLookup lookup = SymbolLookup.libraryLookup(library, Arena.global());
                    Linker linker = Linker.nativeLinker();
                    MethodHandle variants = linker.downcallHandle(
                            lookup.findOrThrow("glimmer_cpu_variants"), FunctionDescriptor.of(ValueLayout.JAVA_INT));
                    int runs = (int) variants.invokeExact();
                    // (w, rowBytes, blocks, rowFrom, rowTo, three activation arrays, xRows, n, out, outOffset,
                    // outStride): the Q4_0 matmul's and the K-quant matmuls' arguments alike.
                    FunctionDescriptor matmul = FunctionDescriptor.ofVoid(
                            ValueLayout.ADDRESS,
                            ValueLayout.JAVA_LONG,
                            ValueLayout.JAVA_INT,
                            ValueLayout.JAVA_INT,
                            ValueLayout.JAVA_INT,
                            ValueLayout.ADDRESS,
                            ValueLayout.ADDRESS,
                            ValueLayout.ADDRESS,
                            ValueLayout.ADDRESS,
                            ValueLayout.JAVA_INT,
                            ValueLayout.ADDRESS,
                            ValueLayout.JAVA_LONG,
                            ValueLayout.JAVA_INT);
                    for (Variant v : Variant.values()) {
                        var symbol = lookup.find(v.matmulSymbol());
                        if ((runs & 1 << v.ordinal()) != 0 && symbol.isPresent()) {
                            MATMUL[v.ordinal()] =
                                    linker.downcallHandle(symbol.get(), matmul, Linker.Option.critical(true));
                            if (TYPED.stream()
                                    .allMatch(t -> lookup.find(v.typedSymbol(t)).isPresent())) {
                                TYPED_MATMUL[v.ordinal()] = new MethodHandle[TYPED.size()];
                                for (int i = 0; i < TYPED.size(); i++) {
                                    TYPED_MATMUL[v.ordinal()][i] = linker.downcallHandle(
                                            lookup.findOrThrow(v.typedSymbol(TYPED.get(i))),
                                            matmul,
                                            Linker.Option.critical(true));
                                }
                            }
                        }
                    }
                    activations = linker.downcallHandle(
                            lookup.findOrThrow("glimmer_q4_0_activations"),
                            FunctionDescriptor.ofVoid(
                                    ValueLayout.ADDRESS,
                                    ValueLayout.JAVA_INT,
                                    ValueLayout.ADDRESS,
                                    ValueLayout.ADDRESS,
                                    ValueLayout.ADDRESS,
                                    ValueLayout.JAVA_LONG),
                            Linker.Option.critical(true));
                    if (named != null) {
                        if (MATMUL[named.ordinal()] != null) {
                            chosen = named;
                        } else {
                            valid = false;
                            whyNot = SETTING_ENV + "=" + setting + ": this processor does not run the "
                                    + named.instructions + " kernel (it runs: " + runnableNames() + ")";
                        }
                    } else {
                        for (Variant v : Variant.values()) {
                            if (chosen == null && MATMUL[v.ordinal()] != null) {
                                chosen = v;
                            }
                        }
                        if (chosen == null) {
                            whyNot = "this processor has none of the instruction sets of the native Q4_0 kernel";
                        }
                    }
                }
            } catch (Throwable e) {
                whyNot = "the native Q4_0 kernel did not load: " + e.getMessage();
            }
        }
        Q4_0_ACTIVATIONS = activations;
        CHOSEN = chosen;
        WHY_JAVA = whyNot;
        SETTING_VALID = valid;
    }

    private NativeKernels() {}

    /**
     * The variant the CPU backend uses by default here (the best this processor runs, or the one
     * {@code GLIMMER_CPU_KERNELS} names), or null for the Java kernels.
     *
     * @throws InvalidInputException when the setting names no kernels, or a variant this processor cannot run
     */
    static Variant chosen() {
        if (!SETTING_VALID) {
            throw new InvalidInputException(WHY_JAVA);
        }
        return CHOSEN;
    }

    /** Whether {@code variant} can run here. */
    static boolean runs(Variant variant) {
        return MATMUL[variant.ordinal()] != null;
    }

    /** Whether {@code variant} (one that {@link #runs} here) has the {@link #TYPED} types' matmuls ({@link #typedMatmul}). */
    static boolean hasTypedKernels(Variant variant) {
        return TYPED_MATMUL[variant.ordinal()] != null;
    }

    /** The variants that run here, best first. */
    static List<Variant> runnable() {
        return Arrays.stream(Variant.values()).filter(NativeKernels::runs).toList();
    }

    private static String runnableNames() {
        List<Variant> runnable = runnable();
        return runnable.isEmpty()
                ? "none"
                : String.join(", ", runnable.stream().map(v -> v.setting).toList());
    }

    /** Why the Java kernels run by default here (null when a native variant does). */
    static String whyJava() {
        return WHY_JAVA;
    }

    private static String architecture() {
        String arch = System.getProperty("os.arch", "");
        return arch.equals("amd64") || arch.equals("x86_64") ? "x86_64" : arch;
    }

    /** Why the library is not even tried, or null when it is. */
    private static String unavailableReason() {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        if (!os.contains("linux")
                || !(architecture().equals("x86_64") || architecture().equals("aarch64"))) {
            return "the native Q4_0 kernel is built for Linux x86-64 and aarch64 only";
        }
        if (NativeKernels.class.getResource(RESOURCE) == null) {
            return "the native Q4_0 kernel was not built: no C compiler at build time";
        }
        return null;
    }

    /** The library copied out of the class path into a temporary file (deleted when the JVM exits). */
    private static Path extract() throws IOException {
        Path file = Files.createTempFile("glimmer-cpu-", ".so");
        file.toFile().deleteOnExit();
        try (InputStream in = NativeKernels.class.getResourceAsStream(RESOURCE)) {
            Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
        }
        return file;
    }

    /**
     * Activation row {@code x} ({@code cols} values, from the segment's start) quantized as the tensor
     * package's Q8_0 quantizer does and laid out as row {@code row} of {@link ActivationRows}' native
     * layout ({@code xq}, {@code bias}, {@code xd}).
     */
    static void q4_0Activations(
            MemorySegment x, int cols, MemorySegment xq, MemorySegment bias, MemorySegment xd, long row) {
        try {
            Q4_0_ACTIVATIONS.invokeExact(x, cols, xq, bias, xd, row);
        } catch (Throwable e) {
            throw new IllegalStateException("the native Q4_0 activation quantizer failed", e);
        }
    }

    /**
     * With the kernel's {@code variant} (one that {@link #runs} here): rows {@code [rowFrom, rowTo)} of Q4_0 weights {@code w} ({@code rowBytes} apart, {@code blocks}
     * blocks each) times the activation rows {@code xRows[0..n)} (in {@link ActivationRows}'
     * native layout): {@code out[outOffset + j*outStride + (r - rowFrom)]}.
     */
    static void q4_0Matmul(
            Variant variant,
            MemorySegment w,
            long rowBytes,
            int blocks,
            int rowFrom,
            int rowTo,
            MemorySegment xq,
            MemorySegment bias,
            MemorySegment xd,
            MemorySegment xRows,
            int n,
            MemorySegment out,
            long outOffset,
            int outStride) {
        try {
            MATMUL[variant.ordinal()].invokeExact(
                    w, rowBytes, blocks, rowFrom, rowTo, xq, bias, xd, xRows, n, out, outOffset, outStride);
        } catch (Throwable e) {
            throw new IllegalStateException("the native Q4_0 kernel failed", e);
        }
    }

    /**
     * With the kernel's {@code variant} (one that {@link #hasTypedKernels}): rows {@code [rowFrom, rowTo)} of
     * {@code type} weights (one of {@link #TYPED}) {@code w} ({@code rowBytes} apart, {@code blocks} super-blocks
     * or blocks each) times the activation rows {@code xRows[0..n)}: row i's int8 quants at {@code xq[i*cols
     * ..]}, its block scales at {@code xd[i*blocks ..]}, for K-quants its sums of 16 quants at
     * {@code xSums[i*cols/16 ..]}; into {@code out[outOffset + j*outStride + (r - rowFrom)]}, bit for bit the Java
     * kernels' dots ({@link KQuantKernels}, {@link Kernels#dotQ5_0}).
     */
    static void typedMatmul(
            Variant variant,
            GgmlType type,
            MemorySegment w,
            long rowBytes,
            int blocks,
            int rowFrom,
            int rowTo,
            MemorySegment xq,
            MemorySegment xd,
            MemorySegment xSums,
            MemorySegment xRows,
            int n,
            MemorySegment out,
            long outOffset,
            int outStride) {
        MethodHandle kernel = TYPED_MATMUL[variant.ordinal()][TYPED.indexOf(type)];
        try {
            kernel.invokeExact(w, rowBytes, blocks, rowFrom, rowTo, xq, xd, xSums, xRows, n, out, outOffset, outStride);
        } catch (Throwable e) {
            throw new IllegalStateException("the native " + type + " kernel failed", e);
        }
    }
}
