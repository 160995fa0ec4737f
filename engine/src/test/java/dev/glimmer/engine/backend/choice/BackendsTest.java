package dev.glimmer.engine.backend.choice;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.cpu.CpuBackend;
import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmForward;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import java.io.IOException;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.DisabledOnOs;
import org.junit.jupiter.api.condition.OS;

/** Backend choice where there is no Metal (this class describes Linux; on a Mac the self-test decides). */
@DisabledOnOs(OS.MAC)
class BackendsTest {

    @Test
    void autoTakesTheCpuAndSaysWhy() throws IOException {
        Assumptions.assumeFalse(CudaChoice.available(), "a CUDA device is present: auto takes it (CudaBackendTest)");
        try (GlmModel model = GlmModel.open(Oracle.model("tiny-q8_0"));
                BackendChoice choice = Backends.choose(BackendKind.AUTO, model)) {
            assertEquals("cpu", choice.name());
            assertEquals(
                    "auto: Metal needs macOS on Apple Silicon, this is " + System.getProperty("os.name") + "/"
                            + System.getProperty("os.arch") + "; CUDA: " + CudaChoice.unavailable(),
                    choice.reason());
            assertTrue(choice.selfTest().isEmpty());
            int[] prompt = Oracle.chatCase("tiny-q8_0").promptTokens();
            try (SequencePool pool = choice.pool(1, 64);
                    SequencePool.Sequence sequence = pool.open();
                    KvCache cache = model.newCache(64, KvCacheType.DEFAULT)) {
                float[] expected = new GlmForward(model, new CpuBackend(), GlmForward.DEFAULT_BATCH)
                        .forward(cache, prompt, 0, prompt.length, false)
                        .clone();
                assertArrayEquals(
                        expected,
                        pool.prompt(sequence, prompt, 0, prompt.length, SequencePool.Readout.LOGITS)
                                .logits());
                assertEquals(prompt.length, sequence.position());
                assertEquals(64, sequence.capacity());
            }
        }
    }

    @Test
    void cpuIsTakenWhenAskedFor() throws IOException {
        try (GlmModel model = GlmModel.open(Oracle.model("tiny-q8_0"));
                BackendChoice choice = Backends.choose(BackendKind.CPU, model)) {
            assertEquals("cpu", choice.name());
            assertEquals("asked for with --backend cpu", choice.reason());
        }
    }

    @Test
    void backendsThatCannotRunHereAreRefusedWithAReason() throws IOException {
        try (GlmModel model = GlmModel.open(Oracle.model("tiny-q8_0"))) {
            assertEquals(
                    "--backend metal: Metal needs macOS on Apple Silicon, this is " + System.getProperty("os.name")
                            + "/" + System.getProperty("os.arch"),
                    assertThrows(InvalidInputException.class, () -> Backends.choose(BackendKind.METAL, model))
                            .getMessage());
            if (!CudaChoice.available()) {
                assertEquals(
                        "--backend cuda: " + CudaChoice.unavailable(),
                        assertThrows(InvalidInputException.class, () -> Backends.choose(BackendKind.CUDA, model))
                                .getMessage());
            }
            assertEquals(
                    "unknown backend 'gpu' (auto, cpu, metal, cuda)",
                    assertThrows(InvalidInputException.class, () -> BackendKind.parse("gpu", BackendKind.SERVING))
                            .getMessage());
        }
        assertTrue(assertThrows(InvalidInputException.class, () -> Backends.selfTest(BackendKind.METAL))
                .getMessage()
                .startsWith("--backend metal: Metal needs macOS"));
    }
}
