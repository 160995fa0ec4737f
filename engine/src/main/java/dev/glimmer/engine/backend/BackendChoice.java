package dev.glimmer.engine.backend;

import java.util.Optional;
import java.util.OptionalLong;

/**
 * The backend a model runs on, and why ({@link Backends#choose}): shown in the log and in
 * {@code /v1/models}. Close it with the model; it owns the device (a CPU choice holds nothing).
 *
 * @param kind     {@code CPU}, {@code METAL} or {@code CUDA} ({@code EMULATED} in tests)
 * @param reason   one line: why this backend (and, after a fallback, what was wrong with the other)
 * @param selfTest the self-test that decided, when one ran
 * @param decoders opens a sequence of a given context size on this backend
 */
public record BackendChoice(BackendKind kind, String reason, Optional<SelfTest.Report> selfTest, Decoders decoders)
        implements AutoCloseable {

    /**
     * What a GPU offers for a pool of sequences.
     *
     * @param device       names the device and the figure, for messages
     * @param available    bytes
     * @param weightsThere whether the weights already lie in the used part (CUDA's free memory, read after the
     *                     upload) rather than in {@code available} (Metal's working set)
     */
    public record DeviceMemory(String device, long available, boolean weightsThere) {
    }

    /** Opens sequences on one backend for one model. */
    public interface Decoders extends AutoCloseable {
        TokenDecoder open(int capacity);

        /**
         * Up to {@code slots} sequences of {@code capacity} positions that step together: independent decoders
         * stepped in turn unless the backend batches them (CUDA, Metal, the emulator).
         */
        default SequencePool pool(int slots, int capacity) {
            return SequencePool.oneByOne(this, slots, capacity);
        }

        /** Memory one more sequence of {@code capacity} positions costs in a pool: by default, what one decoder takes. */
        default long bytesPerSequence(int capacity) {
            try (TokenDecoder probe = open(capacity)) {
                return probe.bytes();
            }
        }

        /**
         * Device memory the backend holds now (weights and open sequences, as the driver counts it);
         * empty where the backend has no memory of its own (the CPU; Metal's unified memory).
         */
        default OptionalLong gpuMemoryUsed() {
            return OptionalLong.empty();
        }

        /**
         * What the device offers for a pool (checked against the pool's MemoryBudget before it is made); empty where
         * the backend cannot say (the CPU, the emulator).
         */
        default Optional<DeviceMemory> deviceMemory() {
            return Optional.empty();
        }

        /** Releases the device; the CPU holds nothing. */
        @Override
        default void close() {
        }
    }

    /** The backend's name, e.g. {@code cuda}. */
    public String name() {
        return kind.cliName();
    }

    public TokenDecoder open(int capacity) {
        return decoders.open(capacity);
    }

    /** See {@link Decoders#gpuMemoryUsed()}. */
    public OptionalLong gpuMemoryUsed() {
        return decoders.gpuMemoryUsed();
    }

    @Override
    public void close() {
        try {
            decoders.close();
        } catch (RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }
}
