package dev.glimmer.engine.architecture;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The engine's packages as its sources import them (a plain scan of {@code import} lines and fully qualified names):
 * no cycle between packages, and the backends' implementations (CUDA, Metal, the emulator) imported by nothing but
 * the backend choice, so that everything above {@code SequencePool} is the same on every backend.
 */
class PackageDependenciesTest {
    private static final Path SOURCES = Path.of("src", "main", "java");
    private static final String ROOT = "dev.glimmer.engine";
    private static final Set<String> IMPLEMENTATIONS =
            Set.of(ROOT + ".backend.cuda", ROOT + ".backend.metal", ROOT + ".backend.emulated");
    private static final String CHOICE = ROOT + ".backend.choice";
    private static final Pattern PACKAGE = Pattern.compile("^package ([\\w.]+);", Pattern.MULTILINE);
    /** An engine type named in code: imported, or written out (a {@code dev.glimmer.engine.x.Type} reference). */
    private static final Pattern REFERENCE =
            Pattern.compile("\\b(" + Pattern.quote(ROOT) + "(?:\\.[a-z]\\w*)*)\\.[A-Z]");

    /** Each engine package and the engine packages its sources refer to (itself left out). */
    static Map<String, Set<String>> dependencies() {
        Map<String, Set<String>> deps = new TreeMap<>();
        try (Stream<Path> files = Files.walk(SOURCES)) {
            for (Path f : files.filter(p -> p.toString().endsWith(".java")).toList()) {
                String text = Files.readString(f);
                Matcher pkg = PACKAGE.matcher(text);
                assertTrue(pkg.find(), f + " has no package line");
                Set<String> used = deps.computeIfAbsent(pkg.group(1), k -> new TreeSet<>());
                // comments may name other packages ({@link ...}); only code counts
                Matcher ref =
                        REFERENCE.matcher(text.replaceAll("(?s)/\\*.*?\\*/", "").replaceAll("//[^\\n]*", ""));
                while (ref.find()) {
                    if (!ref.group(1).equals(pkg.group(1))) {
                        used.add(ref.group(1));
                    }
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return deps;
    }

    @Test
    void noCycleBetweenPackages() {
        Map<String, Set<String>> deps = dependencies();
        assertTrue(deps.size() > 10, "the scan found the engine's packages: " + deps.keySet());
        List<String> cycles = new ArrayList<>();
        for (String start : deps.keySet()) {
            List<String> path = pathBack(deps, start, start, new TreeSet<>());
            if (path != null) {
                cycles.add(start + " -> " + String.join(" -> ", path));
            }
        }
        assertEquals(List.of(), cycles, "package cycles");
    }

    /** A path of dependencies from {@code from} back to {@code target}, or null. */
    private static List<String> pathBack(Map<String, Set<String>> deps, String from, String target, Set<String> seen) {
        for (String next : deps.getOrDefault(from, Set.of())) {
            if (next.equals(target)) {
                return new ArrayList<>(List.of(next));
            }
            if (seen.add(next)) {
                List<String> rest = pathBack(deps, next, target, seen);
                if (rest != null) {
                    rest.addFirst(next);
                    return rest;
                }
            }
        }
        return null;
    }

    @Test
    void onlyTheBackendChoiceKnowsTheImplementations() {
        Map<String, Set<String>> deps = dependencies();
        List<String> leaks = new ArrayList<>();
        deps.forEach((pkg, used) -> {
            for (String u : used) {
                if (IMPLEMENTATIONS.contains(u) && !pkg.equals(CHOICE) && !IMPLEMENTATIONS.contains(pkg)) {
                    leaks.add(pkg + " -> " + u);
                }
            }
        });
        assertEquals(List.of(), leaks);
        assertTrue(deps.get(CHOICE).containsAll(IMPLEMENTATIONS), String.valueOf(deps.get(CHOICE)));
    }
}
