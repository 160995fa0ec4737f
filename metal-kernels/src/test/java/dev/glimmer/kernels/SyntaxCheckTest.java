package dev.glimmer.kernels;

import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.kernels.emulator.Emulator;
import dev.glimmer.kernels.emulator.EmulatorBuild;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Every .metal file compiles with clang-19 against the emulator prelude, with warnings as errors. */
class SyntaxCheckTest {

    @Test
    void everyKernelFileCompiles() {
        List<KernelLibrary.SourceFile> before = new ArrayList<>();
        for (KernelLibrary.SourceFile f : KernelLibrary.load().files()) {
            String errors = EmulatorBuild.syntaxCheck(before, f, Emulator.BUILD_DIRECTORY);
            assertNull(errors, f.name() + " does not compile:\n" + errors);
            before.add(f);
        }
    }

    @Test
    void aBrokenFileIsReportedWithItsName() {
        KernelLibrary.SourceFile broken = new KernelLibrary.SourceFile(
                "broken.metal", "kernel void k(device float * x [[buffer(0)]]) {\n    x[0] = undefined_thing;\n}\n");
        String errors = EmulatorBuild.syntaxCheck(List.of(), broken, Emulator.BUILD_DIRECTORY);
        assertNotNull(errors);
        assertTrue(errors.contains("broken.metal:2"), errors);
    }
}
