package dev.glimmer.kernels.emulator;

import dev.glimmer.kernels.KernelLibrary;
import dev.glimmer.kernels.KernelSignature;
import dev.glimmer.kernels.Size3;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Runs kernels of a {@link KernelLibrary} on the CPU: the library's sources compiled with clang-19
 * into a shared library (see {@link EmulatorBuild}) and called through FFM. One dispatch runs on
 * the calling thread; its failures come back as {@link EmulatorException}s, never as a crash.
 */
public final class Emulator {

    /** Where builds are cached, relative to the working directory (the module directory under Maven). */
    public static final Path BUILD_DIRECTORY = Path.of("target", "emulator");

    private static final Map<Path, Emulator> LOADED = new ConcurrentHashMap<>();
    private static final int ERROR_CAPACITY = 8192;

    private final KernelLibrary library;
    private final SymbolLookup symbols;
    private final MethodHandle dispatch;

    private Emulator(KernelLibrary library, Path sharedLibrary) {
        this.library = library;
        this.symbols = SymbolLookup.libraryLookup(sharedLibrary, Arena.global());
        this.dispatch = Linker.nativeLinker()
                .downcallHandle(
                        symbols.find("glimmer_emu_dispatch").orElseThrow(),
                        FunctionDescriptor.of(
                                ValueLayout.JAVA_INT,
                                ValueLayout.ADDRESS,
                                ValueLayout.ADDRESS,
                                ValueLayout.ADDRESS,
                                ValueLayout.ADDRESS,
                                ValueLayout.JAVA_INT,
                                ValueLayout.ADDRESS,
                                ValueLayout.ADDRESS,
                                ValueLayout.JAVA_INT,
                                ValueLayout.JAVA_LONG,
                                ValueLayout.ADDRESS,
                                ValueLayout.JAVA_INT));
    }

    /** The emulator of the project's kernels. */
    public static Emulator load() {
        return load(KernelLibrary.load());
    }

    /** The emulator of {@code library}, built (or found in the cache) and loaded once per JVM. */
    public static Emulator load(KernelLibrary library) {
        Path lib = EmulatorBuild.sharedLibrary(library, BUILD_DIRECTORY).toAbsolutePath();
        return LOADED.computeIfAbsent(lib, p -> new Emulator(library, p));
    }

    public KernelLibrary library() {
        return library;
    }

    /**
     * Runs {@code kernel} over {@code grid} threadgroups of {@code threads} threads.
     *
     * @param buffers           the segment bound at each buffer index (a slice for a binding with an offset)
     * @param threadgroupMemory bytes of each threadgroup-memory binding
     */
    public void dispatch(
            String kernel,
            List<MemorySegment> buffers,
            int[] threadgroupMemory,
            Size3 grid,
            Size3 threads,
            FiberOrder order) {
        KernelSignature signature = library.kernel(kernel);
        if (buffers.size() < signature.bufferCount()) {
            throw new IllegalArgumentException(
                    kernel + " binds " + signature.bufferCount() + " buffers, got " + buffers.size());
        }
        if (threadgroupMemory.length < signature.threadgroupMemoryCount()) {
            throw new IllegalArgumentException(kernel + " needs " + signature.threadgroupMemoryCount()
                    + " threadgroup memory lengths, got " + threadgroupMemory.length);
        }
        MemorySegment thunk = symbols.find(ThunkGenerator.thunkName(kernel)).orElseThrow();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment pointers = arena.allocate(ValueLayout.ADDRESS, Math.max(1, buffers.size()));
            for (int i = 0; i < buffers.size(); i++) {
                MemorySegment b = buffers.get(i);
                pointers.setAtIndex(ValueLayout.ADDRESS, i, b == null ? MemorySegment.NULL : b);
            }
            MemorySegment memory = arena.allocate(ValueLayout.JAVA_INT, Math.max(1, threadgroupMemory.length));
            MemorySegment.copy(threadgroupMemory, 0, memory, ValueLayout.JAVA_INT, 0, threadgroupMemory.length);
            MemorySegment g = arena.allocateFrom(ValueLayout.JAVA_INT, grid.x(), grid.y(), grid.z());
            MemorySegment t = arena.allocateFrom(ValueLayout.JAVA_INT, threads.x(), threads.y(), threads.z());
            MemorySegment error = arena.allocate(ERROR_CAPACITY);
            int rc = (int) dispatch.invokeExact(
                    thunk,
                    arena.allocateFrom(kernel),
                    pointers,
                    memory,
                    threadgroupMemory.length,
                    g,
                    t,
                    order.mode().ordinal(),
                    order.seed(),
                    error,
                    ERROR_CAPACITY);
            if (rc != 0) {
                throw new EmulatorException(error.getString(0));
            }
        } catch (EmulatorException | IllegalArgumentException e) {
            throw e;
        } catch (Throwable e) {
            throw new IllegalStateException("emulator call failed for " + kernel, e);
        }
    }
}
