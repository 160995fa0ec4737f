package dev.glimmer.engine.backend.cpu;

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
import java.util.Locale;

/**
 * The optional native CPU kernel ({@code engine/src/main/c/q4_0_avx512.c}): Q4_0 weight rows times
 * Q8_0 activation rows with AVX-512 VNNI integer dot products, which the Vector API cannot emit (it
 * has no integer dot product), called through the FFM API.
 *
 * <p>It is an accelerator, never a requirement: the build compiles it when a C compiler is there
 * ({@code engine/build-native.sh}), and it is used only where the library loads and the processor has
 * the instructions; everywhere else the Java kernels ({@link Kernels}) run. Its results are the Java
 * kernel's bit for bit (same integer lanes, same double sums in the same order), so the choice never
 * changes a logit. {@code -Dglimmer.cpu.native=false} turns it off.
 *
 * <p>The downcalls are "critical" (no thread-state transition, heap arrays passed in place): each
 * lasts microseconds and must not allocate, as the decode path allocates nothing once warm.
 */
final class NativeKernels {
    /** Where the build puts the library inside the engine's classes. */
    static final String RESOURCE = "/native/linux-x86_64/libglimmer-cpu.so";
    /** The system property that turns the native kernel off ({@code false}). */
    static final String ENABLE_PROPERTY = "glimmer.cpu.native";

    private static final MethodHandle Q4_0_MATMUL;
    private static final MethodHandle Q4_0_ACTIVATIONS;
    private static final String STATUS;

    static {
        MethodHandle matmul = null;
        MethodHandle activations = null;
        String status;
        try {
            status = unavailableReason();
            if (status == null) {
                Path library = extract();
                SymbolLookup lookup = SymbolLookup.libraryLookup(library, Arena.global());
                Linker linker = Linker.nativeLinker();
                MethodHandle supported = linker.downcallHandle(lookup.findOrThrow("glimmer_q4_0_supported"),
                        FunctionDescriptor.of(ValueLayout.JAVA_INT));
                if ((int) supported.invokeExact() == 1) {
                    matmul = linker.downcallHandle(lookup.findOrThrow("glimmer_q4_0_matmul"),
                            FunctionDescriptor.ofVoid(
                                    ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT,
                                    ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.ADDRESS,
                                    ValueLayout.ADDRESS, ValueLayout.JAVA_INT,
                                    ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT),
                            Linker.Option.critical(true));
                    activations = linker.downcallHandle(lookup.findOrThrow("glimmer_q4_0_activations"),
                            FunctionDescriptor.ofVoid(ValueLayout.ADDRESS, ValueLayout.JAVA_INT,
                                    ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG),
                            Linker.Option.critical(true));
                    status = "native Q4_0 kernel (AVX-512 VNNI)";
                } else {
                    status = "Java kernels (this processor lacks AVX-512 VNNI/VBMI for the native Q4_0 kernel)";
                }
            }
        } catch (Throwable e) {
            status = "Java kernels (the native Q4_0 kernel did not load: " + e.getMessage() + ")";
        }
        Q4_0_MATMUL = matmul;
        Q4_0_ACTIVATIONS = activations;
        STATUS = status;
    }

    private NativeKernels() {
    }

    /** Whether the native Q4_0 kernel can run here. */
    static boolean available() {
        return Q4_0_MATMUL != null;
    }

    /** What the CPU backend multiplies Q4_0 weights with here, and if not natively, why. */
    static String status() {
        return STATUS;
    }

    /** Why the library is not even tried, or null when it is. */
    private static String unavailableReason() {
        if (!Boolean.parseBoolean(System.getProperty(ENABLE_PROPERTY, "true"))) {
            return "Java kernels (-D" + ENABLE_PROPERTY + "=false)";
        }
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        String arch = System.getProperty("os.arch", "");
        if (!os.contains("linux") || !(arch.equals("amd64") || arch.equals("x86_64"))) {
            return "Java kernels (the native Q4_0 kernel is built for Linux x86-64 only)";
        }
        if (NativeKernels.class.getResource(RESOURCE) == null) {
            return "Java kernels (the native Q4_0 kernel was not built: no C compiler at build time)";
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
    static void q4_0Activations(MemorySegment x, int cols, MemorySegment xq, MemorySegment bias, MemorySegment xd, long row) {
        try {
            Q4_0_ACTIVATIONS.invokeExact(x, cols, xq, bias, xd, row);
        } catch (Throwable e) {
            throw new IllegalStateException("the native Q4_0 activation quantizer failed", e);
        }
    }

    /**
     * Rows {@code [rowFrom, rowTo)} of Q4_0 weights {@code w} ({@code rowBytes} apart, {@code blocks}
     * blocks each) times the activation rows {@code xRows[0..n)} (in {@link ActivationRows}'
     * native layout): {@code out[outOffset + j*outStride + (r - rowFrom)]}.
     */
    static void q4_0Matmul(MemorySegment w, long rowBytes, int blocks, int rowFrom, int rowTo,
                           MemorySegment xq, MemorySegment bias, MemorySegment xd,
                           MemorySegment xRows, int n,
                           MemorySegment out, long outOffset, int outStride) {
        try {
            Q4_0_MATMUL.invokeExact(w, rowBytes, blocks, rowFrom, rowTo, xq, bias, xd, xRows, n, out, outOffset, outStride);
        } catch (Throwable e) {
            throw new IllegalStateException("the native Q4_0 kernel failed", e);
        }
    }
}
