package dev.glimmer.engine.backend.metal;

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
import java.util.Arrays;
import java.util.List;

/**
 * fake_objc.c (a logging stand-in for libobjc and Metal) compiled with clang-19 and loaded, with
 * the runtime over it and its log and bookkeeping. Public for the backend choice's tests, which
 * open Metal devices over it.
 */
public final class FakeObjcRuntime {

    /** The stand-in's soname: once loaded, {@code dlopen} finds it by this name, as macOS finds libobjc in its cache. */
    static final String SONAME = "libglimmerfakeobjc.so";

    private static SymbolLookup lookup;

    private final MethodHandle log;
    private final MethodHandle liveOwned;
    private final MethodHandle poolDepth;
    private final MethodHandle configure;
    private final MethodHandle residencySets;
    private final MethodHandle fail;
    private final MethodHandle limit;
    private final MethodHandle boundContents;

    private FakeObjcRuntime() {
        Linker linker = Linker.nativeLinker();
        log = linker.downcallHandle(lookup.find("fake_log").orElseThrow(), FunctionDescriptor.of(ValueLayout.ADDRESS));
        liveOwned = linker.downcallHandle(
                lookup.find("fake_live_owned").orElseThrow(), FunctionDescriptor.of(ValueLayout.JAVA_LONG));
        poolDepth = linker.downcallHandle(
                lookup.find("fake_pool_depth").orElseThrow(), FunctionDescriptor.of(ValueLayout.JAVA_LONG));
        configure = linker.downcallHandle(
                lookup.find("fake_configure").orElseThrow(),
                FunctionDescriptor.ofVoid(ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.ADDRESS));
        fail = linker.downcallHandle(
                lookup.find("fake_fail").orElseThrow(),
                FunctionDescriptor.ofVoid(ValueLayout.ADDRESS, ValueLayout.JAVA_LONG));
        limit = linker.downcallHandle(
                lookup.find("fake_limit").orElseThrow(),
                FunctionDescriptor.ofVoid(ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG));
        boundContents = linker.downcallHandle(
                lookup.find("fake_bound_contents").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.JAVA_LONG));
        residencySets = linker.downcallHandle(
                lookup.find("fake_set_residency_sets").orElseThrow(), FunctionDescriptor.ofVoid(ValueLayout.JAVA_INT));
    }

    /** Whether the device answers to {@code newResidencySetWithDescriptor:error:} (macOS 15); no by default. */
    FakeObjcRuntime withResidencySets() throws Throwable {
        residencySets.invokeExact(1);
        return this;
    }

    /** The {@code nth} (from 1) message {@code selector} (or call of MTLCreateSystemDefaultDevice) answers nil. */
    public FakeObjcRuntime failing(String selector, long nth) throws Throwable {
        try (Arena a = Arena.ofConfined()) {
            fail.invokeExact(a.allocateFrom(selector), nth);
        }
        return this;
    }

    /** The pipeline of {@code kernel} allows {@code maxThreads} per threadgroup and has {@code staticMemory} bytes of its own. */
    public FakeObjcRuntime limiting(String kernel, long maxThreads, long staticMemory) throws Throwable {
        try (Arena a = Arena.ofConfined()) {
            limit.invokeExact(a.allocateFrom(kernel), maxThreads, staticMemory);
        }
        return this;
    }

    /**
     * The fake, reset to a device called {@code name} of GPU family Apple{@code appleFamily} (7: M1, 8: M2,
     * 9: M3) whose compiler answers {@code compileError} (null: no error).
     */
    public static synchronized FakeObjcRuntime configure(String name, int appleFamily, String compileError)
            throws Throwable {
        if (lookup == null) {
            lookup = SymbolLookup.libraryLookup(build(), Arena.global());
        }
        FakeObjcRuntime f = new FakeObjcRuntime();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment error = compileError == null ? MemorySegment.NULL : a.allocateFrom(compileError);
            f.configure.invokeExact(a.allocateFrom(name), (long) appleFamily, error);
        }
        return f;
    }

    /** Opens the Metal device over the fake, as {@link MetalDevice#open()} does over the real runtime. */
    public MetalDevice openDevice() {
        return MetalDevice.open(runtime(), false);
    }

    private static Path build() throws IOException, InterruptedException {
        Path dir = Files.createDirectories(Path.of("target", "fake-objc"));
        Path source = dir.resolve("fake_objc.c");
        try (InputStream in = FakeObjcRuntime.class.getResourceAsStream("fake_objc.c")) {
            Files.write(source, in.readAllBytes());
        }
        Path library = dir.resolve(SONAME).toAbsolutePath();
        Process p = new ProcessBuilder(
                        "clang-19",
                        "-shared",
                        "-fPIC",
                        "-O1",
                        "-Wall",
                        "-Wl,-soname," + SONAME,
                        "-o",
                        library.toString(),
                        source.toString())
                .redirectErrorStream(true)
                .start();
        String out = new String(p.getInputStream().readAllBytes());
        if (p.waitFor() != 0) {
            throw new IllegalStateException("fake_objc.c does not compile:\n" + out);
        }
        return library;
    }

    ObjcRuntime runtime() {
        return ObjcRuntime.using(lookup);
    }

    /** The logged messages, one per line. */
    List<String> log() throws Throwable {
        String text =
                ((MemorySegment) log.invokeExact()).reinterpret(Long.MAX_VALUE).getString(0);
        return text.isEmpty() ? List.of() : Arrays.asList(text.split("\n"));
    }

    /**
     * The first {@code bytes} of the buffer that the {@code nth} (from 0) logged {@code setKernelBuffer:offset:atIndex:}
     * (or {@code setBuffer:offset:atIndex:}) bound, from its start: what the GPU reads there. Two bindings of one
     * buffer give the same address.
     */
    MemorySegment boundContents(long nth, long bytes) throws Throwable {
        MemorySegment contents = (MemorySegment) boundContents.invokeExact(nth);
        if (contents.equals(MemorySegment.NULL)) {
            throw new IllegalArgumentException("no binding " + nth + " was logged");
        }
        return contents.reinterpret(bytes);
    }

    /** Objects made owned (new…, Create) and not yet released. */
    public long liveOwned() throws Throwable {
        return (long) liveOwned.invokeExact();
    }

    long poolDepth() throws Throwable {
        return (long) poolDepth.invokeExact();
    }
}
