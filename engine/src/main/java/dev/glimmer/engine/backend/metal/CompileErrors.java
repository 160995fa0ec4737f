package dev.glimmer.engine.backend.metal;

import dev.glimmer.kernels.KernelLibrary;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Names the kernel a Metal compiler message is about: the library source carries {@code #line}
 * directives, so Metal reports {@code matvec.metal:30:5: error: …}, and the kernel is the last
 * {@code kernel void} declared in that file at or before that line (none for helpers above the first).
 */
final class CompileErrors {

    private static final Pattern LOCATION = Pattern.compile("([\\w.-]+\\.metal):(\\d+):\\d+: error");
    private static final Pattern KERNEL = Pattern.compile("^\\s*kernel\\s+void\\s+(\\w+)");

    private CompileErrors() {}

    /** The message with the kernel of its first error in front, when it can be found. */
    static String describe(KernelLibrary library, String message) {
        return kernelOf(library, message)
                .map(k -> "kernel " + k + ": " + message)
                .orElse(message);
    }

    static Optional<String> kernelOf(KernelLibrary library, String message) {
        Matcher m = LOCATION.matcher(message);
        if (!m.find()) {
            return Optional.empty();
        }
        String file = m.group(1);
        int line = Integer.parseInt(m.group(2));
        return library.files().stream()
                .filter(f -> f.name().equals(file))
                .findFirst()
                .flatMap(f -> {
                    String[] lines = f.text().split("\n", -1);
                    for (int i = Math.min(line, lines.length) - 1; i >= 0; i--) {
                        Matcher k = KERNEL.matcher(lines[i]);
                        if (k.find()) {
                            return Optional.of(k.group(1));
                        }
                    }
                    return Optional.empty();
                });
    }
}
