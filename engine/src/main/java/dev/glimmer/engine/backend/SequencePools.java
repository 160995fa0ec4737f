package dev.glimmer.engine.backend;

import java.util.Optional;
import java.util.OptionalLong;

/** Makes the {@link SequencePool}s of one model on one backend; closing it frees the backend (a GPU's weights). */
public interface SequencePools extends AutoCloseable {

    /** {@code slots} sequences of {@code capacity} positions that step together. */
    SequencePool pool(int slots, int capacity);

    /** The KV bytes one sequence of {@code capacity} positions costs in a pool, without making one. */
    long bytesPerSequence(int capacity);

    /**
     * Device memory the backend holds now (weights and open pools, as the driver counts it); empty where the backend
     * has no memory of its own (the CPU; Metal's unified memory).
     */
    default OptionalLong gpuMemoryUsed() {
        return OptionalLong.empty();
    }

    /**
     * What a GPU offers for a pool of sequences.
     *
     * @param device       names the device and the figure, for messages
     * @param available    bytes
     * @param weightsThere whether the weights already lie in the used part (CUDA's free memory, read after the
     *                     upload) rather than in {@code available} (Metal's working set)
     */
    record DeviceMemory(String device, long available, boolean weightsThere) {}

    /**
     * What the device offers for a pool (checked against the pool's MemoryBudget before it is made); empty where
     * the backend cannot say (the CPU, the emulator).
     */
    default Optional<DeviceMemory> deviceMemory() {
        return Optional.empty();
    }

    /** Releases the device; the CPU holds nothing. */
    @Override
    default void close() {}
}
