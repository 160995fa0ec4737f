package dev.glimmer.kernels;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The kernel sources: the {@code .metal} files under {@code dev/glimmer/kernels/} in the order they
 * are concatenated into one library (later files use the helpers of earlier ones), and their
 * parsed kernel signatures and argument structs.
 */
public final class KernelLibrary {

    /** The kernel files, helpers first. */
    public static final List<String> FILES = List.of(
            "common.metal",
            "matvec.metal",
            "moe.metal",
            "attention.metal",
            "token.metal",
            "tiles.metal",
            "prompt.metal");

    private static final String ROOT = "/dev/glimmer/kernels/";

    private final List<SourceFile> files;
    private final List<KernelSignature> kernels;
    private final List<ArgStruct> structs;

    private KernelLibrary(List<SourceFile> files) {
        this.files = List.copyOf(files);
        List<KernelSignature> k = new ArrayList<>();
        List<ArgStruct> s = new ArrayList<>();
        for (SourceFile f : files) {
            k.addAll(KernelParser.kernels(f.text()));
            s.addAll(KernelParser.structs(f.text()));
        }
        this.kernels = List.copyOf(k);
        this.structs = List.copyOf(s);
    }

    /** A .metal file by name and its text. */
    public record SourceFile(String name, String text) {}

    /** The project's kernels. */
    public static KernelLibrary load() {
        List<SourceFile> files = new ArrayList<>();
        for (String f : FILES) {
            files.add(new SourceFile(f, resource(ROOT + f)));
        }
        return new KernelLibrary(files);
    }

    /** The project's kernels followed by {@code extra} files (e.g. test kernels). */
    public KernelLibrary with(List<SourceFile> extra) {
        List<SourceFile> all = new ArrayList<>(files);
        all.addAll(extra);
        return new KernelLibrary(all);
    }

    /** The text of a classpath resource (absolute name), e.g. a prelude. */
    public static String resource(String name) {
        try (InputStream in = KernelLibrary.class.getResourceAsStream(name)) {
            if (in == null) {
                throw new IllegalStateException("missing kernel resource " + name);
            }
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    public List<SourceFile> files() {
        return files;
    }

    public List<KernelSignature> kernels() {
        return kernels;
    }

    public List<ArgStruct> structs() {
        return structs;
    }

    public KernelSignature kernel(String name) {
        return kernels.stream()
                .filter(k -> k.name().equals(name))
                .findFirst()
                .orElseThrow(() -> new IllegalArgumentException("no kernel named " + name));
    }

    public ArgStruct struct(String name) {
        return structs.stream()
                .filter(s -> s.name().equals(name))
                .findFirst()
                .orElseThrow(() -> new IllegalArgumentException("no argument struct named " + name));
    }

    /**
     * The geometry and weight format macros and the given files, each preceded by a {@code #line} directive
     * so that compiler messages and emulator diagnostics name the .metal file and line.
     */
    public static String concatenate(List<SourceFile> files) {
        StringBuilder sb = new StringBuilder();
        Map<String, Integer> defines = new LinkedHashMap<>(Geometry.defines());
        defines.putAll(WeightFormat.defines());
        for (Map.Entry<String, Integer> d : defines.entrySet()) {
            sb.append("#define ")
                    .append(d.getKey())
                    .append(' ')
                    .append(d.getValue())
                    .append('\n');
        }
        for (SourceFile f : files) {
            sb.append("#line 1 \"").append(f.name()).append("\"\n").append(f.text());
            if (!f.text().endsWith("\n")) {
                sb.append('\n');
            }
        }
        return sb.toString();
    }

    /** The whole library as one source for Apple's Metal compiler ({@code newLibraryWithSource}). */
    public String metalSource() {
        return resource(ROOT + "metal_prelude.h") + concatenate(files);
    }
}
