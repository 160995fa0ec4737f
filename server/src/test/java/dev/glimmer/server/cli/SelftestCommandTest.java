package dev.glimmer.server.cli;

import dev.glimmer.engine.backend.cuda.CudaDevice;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.DisabledOnOs;
import org.junit.jupiter.api.condition.OS;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** {@code ./glimmer selftest} where Metal cannot run (the passing run is SelfTestTest's, in the engine). */
@DisabledOnOs(OS.MAC)
class SelftestCommandTest {

    @Test
    void metalOffMacOsIsExitCode2WithTheReason() {
        MainTest.Result r = MainTest.run("selftest", "--backend", "metal");
        assertEquals(2, r.code(), r.err());
        assertTrue(r.err().contains("--backend metal: Metal needs macOS on Apple Silicon, this is Linux"), r.err());
        assertEquals("", r.out());
    }

    @Test
    void anUnknownBackendIsAUsageError() {
        MainTest.Result r = MainTest.run("selftest", "--backend", "vulkan");
        assertEquals(2, r.code(), r.err());
        assertTrue(r.err().contains("--backend must be one of auto, metal, cuda, emulated, got vulkan"), r.err());
    }

    @Test
    void cudaWithoutADeviceIsExitCode2WithTheReason() {
        Assumptions.assumeTrue(CudaDevice.probe().device().isEmpty(),
                "a CUDA device is present: the passing run is CudaBackendTest's, in the engine");
        MainTest.Result r = MainTest.run("selftest", "--backend", "cuda");
        assertEquals(2, r.code(), r.err());
        assertTrue(r.err().contains("--backend cuda: " + CudaDevice.probe().reason()), r.err());
    }
}
