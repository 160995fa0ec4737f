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
 * the runtime over it and its log and bookkeeping.
 */
final class FakeObjcRuntime {

    private static SymbolLookup lookup;

    private final MethodHandle log;
    private final MethodHandle liveOwned;
    private final MethodHandle poolDepth;
    private final MethodHandle configure;
    private final MethodHandle residencySets;

    private FakeObjcRuntime() {
        Linker linker = Linker.nativeLinker();
        log = linker.downcallHandle(lookup.find("fake_log").orElseThrow(), FunctionDescriptor.of(ValueLayout.ADDRESS));
        liveOwned = linker.downcallHandle(lookup.find("fake_live_owned").orElseThrow(), FunctionDescriptor.of(ValueLayout.JAVA_LONG));
        poolDepth = linker.downcallHandle(lookup.find("fake_pool_depth").orElseThrow(), FunctionDescriptor.of(ValueLayout.JAVA_LONG));
        configure = linker.downcallHandle(lookup.find("fake_configure").orElseThrow(),
                FunctionDescriptor.ofVoid(ValueLayout.ADDRESS, ValueLayout.JAVA_INT, ValueLayout.ADDRESS));
        residencySets = linker.downcallHandle(lookup.find("fake_set_residency_sets").orElseThrow(),
                FunctionDescriptor.ofVoid(ValueLayout.JAVA_INT));
    }

    /** Whether the device answers to {@code newResidencySetWithDescriptor:error:} (macOS 15); no by default. */
    FakeObjcRuntime withResidencySets() throws Throwable {
        residencySets.invokeExact(1);
        return this;
    }

    /** The fake, reset to a device called {@code name} whose compiler answers {@code compileError} (null: no error). */
    static synchronized FakeObjcRuntime configure(String name, boolean apple9, String compileError) throws Throwable {
        if (lookup == null) {
            lookup = SymbolLookup.libraryLookup(build(), Arena.global());
        }
        FakeObjcRuntime f = new FakeObjcRuntime();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment error = compileError == null ? MemorySegment.NULL : a.allocateFrom(compileError);
            f.configure.invokeExact(a.allocateFrom(name), apple9 ? 1 : 0, error);
        }
        return f;
    }

    private static Path build() throws IOException, InterruptedException {
        Path dir = Files.createDirectories(Path.of("target", "fake-objc"));
        Path source = dir.resolve("fake_objc.c");
        try (InputStream in = FakeObjcRuntime.class.getResourceAsStream("fake_objc.c")) {
            Files.write(source, in.readAllBytes());
        }
        Path library = dir.resolve("libfakeobjc.so").toAbsolutePath();
        Process p = new ProcessBuilder("clang-19", "-shared", "-fPIC", "-O1", "-Wall", "-o", library.toString(),
                source.toString()).redirectErrorStream(true).start();
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
        String text = ((MemorySegment) log.invokeExact()).reinterpret(Long.MAX_VALUE).getString(0);
        return text.isEmpty() ? List.of() : Arrays.asList(text.split("\n"));
    }

    /** Objects made owned (new…, Create) and not yet released. */
    long liveOwned() throws Throwable {
        return (long) liveOwned.invokeExact();
    }

    long poolDepth() throws Throwable {
        return (long) poolDepth.invokeExact();
    }
}
