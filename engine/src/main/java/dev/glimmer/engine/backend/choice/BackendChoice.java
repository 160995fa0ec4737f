package dev.glimmer.engine.backend.choice;

import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.SequencePools;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * The backend a model runs on, and why ({@link Backends#choose}): shown in the log and in
 * {@code /v1/models}. Close it with the model; it owns the device (a CPU choice holds nothing).
 *
 * @param kind     {@code CPU}, {@code METAL}, {@code CUDA} or {@code EMULATED}
 * @param reason   one line: why this backend (and, after a fallback, what was wrong with the other)
 * @param selfTest the self-test that decided, when one ran
 * @param pools    makes the pools of sequences on this backend
 */
public record BackendChoice(BackendKind kind, String reason, Optional<SelfTest.Report> selfTest, SequencePools pools)
        implements AutoCloseable {

    /** The backend's name, e.g. {@code cuda}. */
    public String name() {
        return kind.cliName();
    }

    /** See {@link SequencePools#pool}. */
    public SequencePool pool(int slots, int capacity) {
        return pools.pool(slots, capacity);
    }

    /** See {@link SequencePools#deviceMemory()}. */
    public Optional<SequencePools.DeviceMemory> deviceMemory() {
        return pools.deviceMemory();
    }

    /** See {@link SequencePools#gpuMemoryUsed()}. */
    public OptionalLong gpuMemoryUsed() {
        return pools.gpuMemoryUsed();
    }

    @Override
    public void close() {
        try {
            pools.close();
        } catch (RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }
}
