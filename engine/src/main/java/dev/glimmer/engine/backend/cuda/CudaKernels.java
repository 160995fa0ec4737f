package dev.glimmer.engine.backend.cuda;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.glimmer.kernels.KernelLibrary;
import dev.glimmer.kernels.KernelSignature;
import dev.glimmer.kernels.Size3;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The project's kernels loaded on a CUDA device: the rewritten source ({@link CudaSourceRewriter})
 * compiled by NVRTC for the device's architecture, the cubin cached on disk under a key of the
 * source, the options, the device and the driver, so later start-ups skip the compiler.
 */
public final class CudaKernels {

    private final CudaDevice device;
    private final KernelLibrary library;
    private final Map<String, MemorySegment> functions = new LinkedHashMap<>();
    private final boolean fromCache;

    private CudaKernels(CudaDevice device, KernelLibrary library, byte[] cubin, boolean fromCache) {
        this.device = device;
        this.library = library;
        this.fromCache = fromCache;
        device.makeCurrent();
        MemorySegment module = device.driver().loadModule(cubin);
        for (KernelSignature k : library.kernels()) {
            functions.put(k.name(), device.driver().function(module, k.name()));
        }
    }

    private static final Map<Integer, CudaKernels> LOADED = new java.util.concurrent.ConcurrentHashMap<>();

    /**
     * The project's kernels on {@code device}, compiled or taken from the cache in
     * {@link #cacheDirectory()}; loaded once per device and JVM.
     */
    public static CudaKernels load(CudaDevice device) {
        return LOADED.computeIfAbsent(device.ordinal(), d -> load(device, KernelLibrary.load(), cacheDirectory()));
    }

    public static CudaKernels load(CudaDevice device, KernelLibrary library, Path cache) {
        String source = CudaSourceRewriter.rewrite(library);
        List<String> options = List.of(device.architecture(), "-std=c++17");
        String key = sha256(source + "\n" + options + "\n" + device.name() + "\n" + device.major() + "."
                + device.minor() + "\n" + device.driver().driverVersion());
        Path file = cache.resolve(key + ".cubin");
        if (Files.isRegularFile(file)) {
            try {
                return new CudaKernels(device, library, Files.readAllBytes(file), true);
            } catch (IOException | CudaException e) {
                // unreadable or stale: compile again below
            }
        }
        byte[] cubin = Nvrtc.load().compile(source, "glimmer.cu", options);
        try {
            Files.createDirectories(cache);
            Path tmp = Files.createTempFile(cache, key, ".tmp");
            Files.write(tmp, cubin);
            Files.move(tmp, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (IOException e) {
            // a read-only cache only costs the next start-up a compile
        }
        return new CudaKernels(device, library, cubin, false);
    }

    /** {@code $GLIMMER_CACHE/cuda}, else {@code $XDG_CACHE_HOME/glimmer/cuda}, else {@code ~/.cache/glimmer/cuda}. */
    public static Path cacheDirectory() {
        String glimmer = System.getenv("GLIMMER_CACHE");
        if (glimmer != null && !glimmer.isBlank()) {
            return Path.of(glimmer, "cuda");
        }
        String xdg = System.getenv("XDG_CACHE_HOME");
        Path base = xdg != null && !xdg.isBlank() ? Path.of(xdg) : Path.of(System.getProperty("user.home"), ".cache");
        return base.resolve("glimmer").resolve("cuda");
    }

    private static String sha256(String s) {
        try {
            return HexFormat.of()
                    .formatHex(MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8)));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    public CudaDevice device() {
        return device;
    }

    public KernelLibrary library() {
        return library;
    }

    /** Whether the cubin came from the disk cache rather than NVRTC. */
    public boolean fromCache() {
        return fromCache;
    }

    /**
     * Launches {@code kernel} on {@code stream} (also while the stream is being captured into a graph).
     *
     * @param buffers           the device address bound at each buffer index (offsets already added)
     * @param threadgroupMemory bytes of each threadgroup-memory binding; they are laid out one after another
     */
    public void launch(
            String kernel, MemorySegment stream, Size3 grid, Size3 threads, long[] buffers, int[] threadgroupMemory) {
        KernelSignature k = library.kernel(kernel);
        if (buffers.length != k.bufferCount() || threadgroupMemory.length < k.threadgroupMemoryCount()) {
            throw new IllegalArgumentException(kernel + " takes " + k.bufferCount() + " buffers and "
                    + k.threadgroupMemoryCount() + " threadgroup memory lengths, got " + buffers.length + " and "
                    + threadgroupMemory.length);
        }
        int tgCount = k.threadgroupMemoryCount();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment params = a.allocate(ADDRESS, Math.max(1, buffers.length + tgCount));
            for (int i = 0; i < buffers.length; i++) {
                MemorySegment value = a.allocate(JAVA_LONG);
                value.set(JAVA_LONG, 0, buffers[i]);
                params.setAtIndex(ADDRESS, i, value);
            }
            int shared = 0;
            for (int i = 0; i < tgCount; i++) {
                MemorySegment value = a.allocate(JAVA_INT);
                value.set(JAVA_INT, 0, shared);
                params.setAtIndex(ADDRESS, buffers.length + i, value);
                shared += threadgroupMemory[i];
            }
            device.driver()
                    .launch(
                            functions.get(kernel),
                            grid.x(),
                            grid.y(),
                            grid.z(),
                            threads.x(),
                            threads.y(),
                            threads.z(),
                            shared,
                            stream,
                            params,
                            kernel);
        }
    }
}
