package dev.glimmer.engine.backend;

import dev.glimmer.engine.InvalidInputException;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * The backends, by the names {@code --backend} and {@code /v1/models} use: {@link #AUTO} asks for the
 * best one that runs here; {@link #EMULATED} is the GPU kernels on the CPU kernel emulator, for the
 * self-test, tests, {@code generate} and {@code logits}, never chosen to serve.
 */
public enum BackendKind {
    AUTO,
    CPU,
    METAL,
    CUDA,
    EMULATED;

    /** What {@code serve} and {@code bench} accept ({@code Backends.choose}). */
    public static final Set<BackendKind> SERVING = Set.of(AUTO, CPU, METAL, CUDA);
    /** What {@code generate} and {@code logits} accept: the serving backends and the emulator. */
    public static final Set<BackendKind> CHOOSABLE = Set.of(AUTO, CPU, METAL, CUDA, EMULATED);
    /** What {@code selftest} accepts ({@code Backends.selfTest}). */
    public static final Set<BackendKind> SELF_TEST = Set.of(AUTO, METAL, CUDA, EMULATED);

    /** The lower-case name, e.g. {@code cuda}. */
    public String cliName() {
        return name().toLowerCase(Locale.ROOT);
    }

    /**
     * The backend named {@code name} (any case) among {@code accepted}.
     *
     * @throws InvalidInputException naming the accepted ones otherwise
     */
    public static BackendKind parse(String name, Set<BackendKind> accepted) {
        for (BackendKind k : accepted) {
            if (k.cliName().equals(name.toLowerCase(Locale.ROOT))) {
                return k;
            }
        }
        throw new InvalidInputException("unknown backend '" + name + "' (" + names(accepted) + ")");
    }

    /** The names of {@code kinds} in declaration order, e.g. {@code auto, cpu, metal, cuda}. */
    public static String names(Set<BackendKind> kinds) {
        return String.join(", ", sortedNames(kinds));
    }

    /** The names as alternatives in a sentence, e.g. {@code auto, cpu, metal or cuda}. */
    public static String alternatives(Set<BackendKind> kinds) {
        List<String> names = sortedNames(kinds);
        return String.join(", ", names.subList(0, names.size() - 1)) + " or " + names.getLast();
    }

    private static List<String> sortedNames(Set<BackendKind> kinds) {
        return kinds.stream().sorted().map(BackendKind::cliName).toList();
    }
}
