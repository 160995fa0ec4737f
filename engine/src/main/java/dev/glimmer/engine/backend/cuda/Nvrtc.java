package dev.glimmer.engine.backend.cuda;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * FFM bindings to NVRTC, CUDA's run-time compiler: CUDA C++ source in, a cubin for one GPU
 * architecture out. The library is found by its versioned name in the usual CUDA locations.
 */
public final class Nvrtc {

    private static final List<String> DIRECTORIES =
            List.of("/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/lib/x86_64-linux-gnu");

    private final MethodHandle create, compile, logSize, log, cubinSize, cubin, destroy, version, errorString;

    private Nvrtc(SymbolLookup lib) {
        create = fn(lib, "nvrtcCreateProgram", ADDRESS, ADDRESS, ADDRESS, JAVA_INT, ADDRESS, ADDRESS);
        compile = fn(lib, "nvrtcCompileProgram", ADDRESS, JAVA_INT, ADDRESS);
        logSize = fn(lib, "nvrtcGetProgramLogSize", ADDRESS, ADDRESS);
        log = fn(lib, "nvrtcGetProgramLog", ADDRESS, ADDRESS);
        cubinSize = fn(lib, "nvrtcGetCUBINSize", ADDRESS, ADDRESS);
        cubin = fn(lib, "nvrtcGetCUBIN", ADDRESS, ADDRESS);
        destroy = fn(lib, "nvrtcDestroyProgram", ADDRESS);
        version = fn(lib, "nvrtcVersion", ADDRESS, ADDRESS);
        errorString = Linker.nativeLinker()
                .downcallHandle(
                        lib.find("nvrtcGetErrorString").orElseThrow(), FunctionDescriptor.of(ADDRESS, JAVA_INT));
    }

    /** NVRTC from the first place it is found; a clear error when it is nowhere. */
    public static Nvrtc load() {
        List<String> tried = new ArrayList<>();
        for (String candidate : candidates()) {
            try {
                return new Nvrtc(SymbolLookup.libraryLookup(candidate, Arena.global()));
            } catch (IllegalArgumentException e) {
                tried.add(candidate);
            }
        }
        throw new CudaException("NVRTC (libnvrtc.so) was not found; tried " + tried
                + ". Install the CUDA toolkit's NVRTC or add its directory to LD_LIBRARY_PATH");
    }

    /** Plain names first (LD_LIBRARY_PATH and the loader cache), then versioned files in the CUDA directories. */
    private static List<String> candidates() {
        List<String> names = new ArrayList<>(List.of("libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"));
        String home = System.getenv("CUDA_HOME");
        List<String> dirs = new ArrayList<>();
        if (home != null) {
            dirs.add(home + "/lib64");
        }
        dirs.addAll(DIRECTORIES);
        for (String d : dirs) {
            try (Stream<Path> files = Files.list(Path.of(d))) {
                files.map(p -> p.toString())
                        .filter(p -> p.matches(".*/libnvrtc\\.so(\\.\\d+)*$"))
                        .sorted()
                        .forEach(names::add);
            } catch (IOException e) {
                // not there: try the next one
            }
        }
        return names;
    }

    private static MethodHandle fn(SymbolLookup lib, String name, MemoryLayout... args) {
        return Linker.nativeLinker()
                .downcallHandle(
                        lib.find(name).orElseThrow(() -> new CudaException("libnvrtc has no " + name)),
                        FunctionDescriptor.of(JAVA_INT, args));
    }

    private static int call(MethodHandle h, Object... args) {
        try {
            return (int) h.invokeWithArguments(args);
        } catch (Throwable e) {
            throw new CudaException("NVRTC call failed: " + e);
        }
    }

    private void check(String what, int result) {
        if (result != 0) {
            String text;
            try {
                text = ((MemorySegment) errorString.invoke(result))
                        .reinterpret(256)
                        .getString(0);
            } catch (Throwable e) {
                text = "error " + result;
            }
            throw new CudaException(what + " failed: " + text);
        }
    }

    /** "major.minor" of this NVRTC. */
    public String version() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment major = a.allocate(JAVA_INT);
            MemorySegment minor = a.allocate(JAVA_INT);
            check("nvrtcVersion", call(version, major, minor));
            return major.get(JAVA_INT, 0) + "." + minor.get(JAVA_INT, 0);
        }
    }

    /**
     * Compiles {@code source} (named {@code name} in messages) with {@code options}, e.g.
     * {@code --gpu-architecture=sm_90}; returns the cubin. A compile error throws with NVRTC's log.
     */
    public byte[] compile(String source, String name, List<String> options) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment prog = a.allocate(ADDRESS);
            check(
                    "nvrtcCreateProgram",
                    call(
                            create,
                            prog,
                            a.allocateFrom(source),
                            a.allocateFrom(name),
                            0,
                            MemorySegment.NULL,
                            MemorySegment.NULL));
            MemorySegment p = prog.get(ADDRESS, 0);
            try {
                MemorySegment opts = a.allocate(ADDRESS, Math.max(1, options.size()));
                for (int i = 0; i < options.size(); i++) {
                    opts.setAtIndex(ADDRESS, i, a.allocateFrom(options.get(i)));
                }
                int result = call(compile, p, options.size(), opts);
                if (result != 0) {
                    throw new CudaException("NVRTC could not compile the CUDA kernels:\n" + log(a, p));
                }
                MemorySegment size = a.allocate(JAVA_LONG);
                check("nvrtcGetCUBINSize", call(cubinSize, p, size));
                MemorySegment out = a.allocate(size.get(JAVA_LONG, 0));
                check("nvrtcGetCUBIN", call(cubin, p, out));
                return out.toArray(JAVA_BYTE);
            } finally {
                call(destroy, prog);
            }
        }
    }

    private String log(Arena a, MemorySegment p) {
        MemorySegment size = a.allocate(JAVA_LONG);
        check("nvrtcGetProgramLogSize", call(logSize, p, size));
        MemorySegment text = a.allocate(Math.max(1, size.get(JAVA_LONG, 0)));
        check("nvrtcGetProgramLog", call(log, p, text));
        return text.getString(0);
    }
}
