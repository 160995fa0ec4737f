package dev.glimmer.engine.backend.metal;

import static dev.glimmer.engine.backend.metal.MetalException.Step.LOADING;
import static java.lang.foreign.ValueLayout.ADDRESS;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The Objective-C runtime through FFM (docs/KERNELS.md §5): libobjc, Foundation, CoreGraphics and Metal loaded by name
 * through {@code dlopen}, one {@code objc_msgSend} downcall handle per method signature, selectors and
 * classes looked up once. Only {@link #load()} touches the native libraries, so the class can be
 * loaded (and its tables tested) anywhere; calling it off macOS fails with a clear message.
 *
 * <p>Ownership: results of {@code new…}/{@code alloc} methods are ours and must be {@link #release}d;
 * everything else is autoreleased and lives until the enclosing {@link #autoreleasePool()} closes.
 */
public final class ObjcRuntime {

    /**
     * The libraries, in load order: CoreGraphics before Metal, or a command-line process gets no device.
     * Since macOS 11 they exist only in the dyld shared cache, not as files: only {@code dlopen} of
     * these names finds them, so they are looked up by name, never as a {@link java.nio.file.Path}
     * (which is resolved on disk first and fails on every current Mac).
     */
    static final List<String> LIBRARIES = List.of(
            "/usr/lib/libobjc.A.dylib",
            "/System/Library/Frameworks/Foundation.framework/Foundation",
            "/System/Library/Frameworks/CoreGraphics.framework/CoreGraphics",
            "/System/Library/Frameworks/Metal.framework/Metal");

    private final Linker linker = Linker.nativeLinker();
    private final SymbolLookup lookup;
    private final List<String> libraries;
    private final MemorySegment msgSend;
    private final MethodHandle getClass;
    private final MethodHandle registerName;
    private final MethodHandle poolPush;
    private final MethodHandle poolPop;
    private final MethodHandle createDevice;
    private final long pageSize;
    private final Map<FunctionDescriptor, MethodHandle> handles = new ConcurrentHashMap<>();
    private final Map<String, MemorySegment> selectors = new ConcurrentHashMap<>();
    private final Map<String, MemorySegment> classes = new ConcurrentHashMap<>();

    private ObjcRuntime(SymbolLookup lookup, List<String> libraries) {
        this.lookup = lookup;
        this.libraries = List.copyOf(libraries);
        this.msgSend = symbol("objc_msgSend");
        this.getClass = function("objc_getClass", FunctionDescriptor.of(ADDRESS, ADDRESS));
        this.registerName = function("sel_registerName", FunctionDescriptor.of(ADDRESS, ADDRESS));
        this.poolPush = function("objc_autoreleasePoolPush", FunctionDescriptor.of(ADDRESS));
        this.poolPop = function("objc_autoreleasePoolPop", FunctionDescriptor.ofVoid(ADDRESS));
        this.createDevice = function("MTLCreateSystemDefaultDevice", FunctionDescriptor.of(ADDRESS));
        MethodHandle getpagesize = linker.downcallHandle(
                linker.defaultLookup().find("getpagesize").orElseThrow(), FunctionDescriptor.of(ValueLayout.JAVA_INT));
        try {
            this.pageSize = (int) getpagesize.invokeExact();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Loads the system's {@link #LIBRARIES}. */
    public static ObjcRuntime load() {
        if (!MetalPlatform.isMacArm64()) {
            throw new MetalException(
                    LOADING, "Metal needs macOS on Apple Silicon; this is " + MetalPlatform.describe());
        }
        return load(LIBRARIES);
    }

    /**
     * A runtime over {@code libraries}, each opened by its name as {@code dlopen} takes it (a path in
     * the dyld shared cache, a soname), in order; the symbols come from the first that has them.
     */
    static ObjcRuntime load(List<String> libraries) {
        SymbolLookup all = null;
        for (String library : libraries) {
            SymbolLookup one;
            try {
                one = SymbolLookup.libraryLookup(library, Arena.global());
            } catch (IllegalArgumentException e) {
                throw new MetalException(LOADING, e.getMessage());
            }
            all = all == null ? one : all.or(one);
        }
        return new ObjcRuntime(all, libraries);
    }

    /** A runtime whose Objective-C and Metal functions come from {@code lookup} (a test's stand-in library). */
    static ObjcRuntime using(SymbolLookup lookup) {
        return new ObjcRuntime(lookup, List.of("a test's stand-in"));
    }

    /** The OS page size (16 KiB on Apple Silicon): no-copy buffers start and end on pages. */
    public long pageSize() {
        return pageSize;
    }

    private MemorySegment symbol(String name) {
        return lookup.find(name)
                .orElseThrow(() -> new MetalException(LOADING, "symbol " + name + " not found in " + libraries));
    }

    private MethodHandle function(String name, FunctionDescriptor descriptor) {
        return linker.downcallHandle(symbol(name), descriptor);
    }

    /** {@code MTLCreateSystemDefaultDevice()}, owned; NULL when the machine has no Metal device. */
    public MemorySegment createSystemDefaultDevice() {
        return (MemorySegment) call(createDevice);
    }

    public MemorySegment selector(String name) {
        return selectors.computeIfAbsent(name, n -> {
            try (Arena a = Arena.ofConfined()) {
                return (MemorySegment) registerName.invokeExact(a.allocateFrom(n));
            } catch (Throwable t) {
                throw rethrow(t);
            }
        });
    }

    /** The class object of {@code name}, e.g. {@code MTLComputePipelineDescriptor}. */
    public MemorySegment objcClass(String name) {
        return classes.computeIfAbsent(name, n -> {
            try (Arena a = Arena.ofConfined()) {
                MemorySegment c = (MemorySegment) getClass.invokeExact(a.allocateFrom(n));
                if (c.equals(MemorySegment.NULL)) {
                    throw new MetalException("Objective-C class " + n + " not found");
                }
                return c;
            } catch (MetalException e) {
                throw e;
            } catch (Throwable t) {
                throw rethrow(t);
            }
        });
    }

    /**
     * Sends {@code method} to {@code receiver}. Arguments are {@code MemorySegment} (ids, pointers,
     * structs by value), {@code long} or {@code boolean} as the method's layouts say.
     *
     * @return the result ({@code MemorySegment}, {@code Long} or {@code Boolean}), null for void
     */
    public Object send(ObjcMethod method, MemorySegment receiver, Object... args) {
        if (receiver.equals(MemorySegment.NULL)) {
            throw new MetalException(method.selector() + " sent to nil");
        }
        MethodHandle h = handles.computeIfAbsent(method.descriptor(), d -> linker.downcallHandle(msgSend, d));
        List<Object> all = new ArrayList<>(args.length + 2);
        all.add(receiver);
        all.add(selector(method.selector()));
        all.addAll(List.of(args));
        try {
            return h.invokeWithArguments(all);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@link #send} for methods returning an object or pointer. */
    public MemorySegment sendForObject(ObjcMethod method, MemorySegment receiver, Object... args) {
        return (MemorySegment) send(method, receiver, args);
    }

    /** Gives up an owned reference (from {@code new…}/{@code alloc}); NULL is ignored. */
    public void release(MemorySegment object) {
        if (!object.equals(MemorySegment.NULL)) {
            send(MetalMethods.RELEASE, object);
        }
    }

    /** An autoreleased NSString. */
    public MemorySegment nsString(String s) {
        try (Arena a = Arena.ofConfined()) {
            return sendForObject(MetalMethods.STRING_WITH_UTF8, objcClass("NSString"), a.allocateFrom(s));
        }
    }

    /** The Java string of an NSString (empty for nil). */
    public String string(MemorySegment nsString) {
        if (nsString.equals(MemorySegment.NULL)) {
            return "";
        }
        MemorySegment utf8 = sendForObject(MetalMethods.UTF8_STRING, nsString);
        return utf8.reinterpret(Long.MAX_VALUE).getString(0);
    }

    /** The message of an NSError, or {@code fallback} when there is none. */
    public String errorMessage(MemorySegment nsError, String fallback) {
        if (nsError.equals(MemorySegment.NULL)) {
            return fallback;
        }
        return string(sendForObject(MetalMethods.LOCALIZED_DESCRIPTION, nsError));
    }

    /** An autorelease pool, drained on close: wrap each token (and the set-up) in one, on one thread. */
    public AutoreleasePool autoreleasePool() {
        return new AutoreleasePool((MemorySegment) call(poolPush));
    }

    /** An open autorelease pool: what was autoreleased since it opened is released when it closes. */
    public final class AutoreleasePool implements AutoCloseable {
        private final MemorySegment pool;

        private AutoreleasePool(MemorySegment pool) {
            this.pool = pool;
        }

        @Override
        public void close() {
            try {
                poolPop.invokeExact(pool);
            } catch (Throwable t) {
                throw rethrow(t);
            }
        }
    }

    private static Object call(MethodHandle noArgs) {
        try {
            return noArgs.invoke();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    private static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) {
            return r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        return new MetalException("native call failed: " + t);
    }

    /** A pointer-sized out parameter ({@code NSError **}), initialised to nil. */
    static MemorySegment outPointer(Arena arena) {
        MemorySegment p = arena.allocate(ValueLayout.ADDRESS);
        p.set(ValueLayout.ADDRESS, 0, MemorySegment.NULL);
        return p;
    }
}
