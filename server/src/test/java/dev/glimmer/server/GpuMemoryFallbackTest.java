package dev.glimmer.server;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.startsWith;

import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.SequencePools;
import dev.glimmer.engine.backend.choice.BackendChoice;
import dev.glimmer.engine.backend.choice.Backends;
import dev.glimmer.engine.backend.emulated.EmulatorRunner;
import dev.glimmer.server.inference.BackendChooser;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

/**
 * A GPU that cannot hold the KV pool: the server serves on the CPU and says why in {@code /v1/models}
 * ({@code meta.backend_reason}), whether the device says so before the pool is made (its memory against the pool's
 * MemoryBudget) or the pool fails to allocate. The GPU is the kernel emulator posing with a device memory.
 */
class GpuMemoryFallbackTest {

    private static final Map<String, String> CONFIG = Map.of("model.ctx", "256", "inference.parallel", "2");

    /**
     * The emulated backend with its device offering {@code memory}; {@code poolFails}: making a pool throws. The CPU,
     * which the server falls back to, is the real one.
     */
    private static BackendChooser posing(Optional<SequencePools.DeviceMemory> memory, boolean poolFails) {
        return posing(memory, poolFails, 0);
    }

    /** {@link #posing}, the process holding {@code held} bytes of the device already (its weights). */
    private static BackendChooser posing(Optional<SequencePools.DeviceMemory> memory, boolean poolFails, long held) {
        AtomicBoolean chosen = new AtomicBoolean();
        // the server's first choice is the posing GPU; the one it falls back to, the real CPU
        return (requested, model, cpu) -> chosen.getAndSet(true)
                ? Backends.choose(BackendKind.CPU, model, cpu)
                : new BackendChoice(
                        BackendKind.EMULATED,
                        "a GPU",
                        Optional.empty(),
                        new PosingPools(EmulatorRunner.pools(model), memory, poolFails, held));
    }

    private record PosingPools(
            SequencePools real, Optional<SequencePools.DeviceMemory> memory, boolean poolFails, long held)
            implements SequencePools {
        @Override
        public OptionalLong gpuMemoryUsed() {
            return OptionalLong.of(held);
        }

        @Override
        public SequencePool pool(int slots, int capacity) {
            if (poolFails) {
                throw new IllegalStateException("out of device memory allocating kv.0");
            }
            return real.pool(slots, capacity);
        }

        @Override
        public long bytesPerSequence(int capacity) {
            return real.bytesPerSequence(capacity);
        }

        @Override
        public Optional<SequencePools.DeviceMemory> deviceMemory() {
            return memory;
        }
    }

    private static void assertServesOnTheCpuBecause(BackendChooser chooser, String reasonStart) {
        assertServesOnTheCpuBecause(CONFIG, chooser, reasonStart);
    }

    private static void assertServesOnTheCpuBecause(
            Map<String, String> config, BackendChooser chooser, String reasonStart) {
        GlimmerApp app = TestServer.start(config, chooser);
        try {
            given().port(app.port())
                    .get("/v1/models")
                    .then()
                    .statusCode(200)
                    .body("data[0].meta.backend", equalTo("cpu"))
                    .body("data[0].meta.backend_reason", startsWith(reasonStart));
            given().port(app.port())
                    .contentType("application/json")
                    .body("{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 2}")
                    .post("/v1/chat/completions")
                    .then()
                    .statusCode(200);
        } finally {
            app.close();
        }
    }

    @Test
    void aDeviceTooSmallForThePoolServesOnTheCpuSayingWhatToChange() {
        assertServesOnTheCpuBecause(
                posing(Optional.of(new SequencePools.DeviceMemory("a 1 MB GPU", 1_000_000, true)), false),
                "emulated not used: a 1 MB GPU offers 1.0 MB, but 2 conversations of 256 tokens need");
    }

    @Test
    void aPoolThatFailsToAllocateServesOnTheCpu() {
        assertServesOnTheCpuBecause(
                posing(Optional.empty(), true),
                "emulated not used: its KV pool could not be made: out of device memory allocating kv.0");
    }

    @Test
    void theGpuMemoryCapCountsTheWeightsAlreadyThere() {
        Map<String, String> capped = new HashMap<>(CONFIG);
        capped.put("inference.gpu-memory-gb", "1");
        assertServesOnTheCpuBecause(
                capped,
                posing(
                        Optional.of(new SequencePools.DeviceMemory("a 100 GB GPU", 100_000_000_000L, true)),
                        false,
                        999_000_000L),
                "emulated not used: --gpu-memory 1 (999 MB already taken) offers 1.0 MB, but 2 conversations");
    }
}
