package dev.glimmer.engine.backend.metal;

import java.util.Locale;

/** Whether this JVM runs where Metal can exist: macOS on arm64 (Apple Silicon). */
public final class MetalPlatform {

    private MetalPlatform() {}

    public static boolean isMacArm64() {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        return os.startsWith("mac") && (arch.equals("aarch64") || arch.equals("arm64"));
    }

    /** E.g. {@code Linux/amd64}. */
    public static String describe() {
        return System.getProperty("os.name") + "/" + System.getProperty("os.arch");
    }
}
