package dev.glimmer.server.inference;

/**
 * One conversation's KV cache, wherever its backend keeps it (host memory for the CPU, device memory
 * for a GPU decoder), as the session manager and the scheduler see it. Made by a {@link StepRunner},
 * which is also what computes with it.
 */
interface SequenceCache extends AutoCloseable {

    /** Positions held. */
    int size();

    /** Positions it can hold. */
    int capacity();

    default int remaining() {
        return capacity() - size();
    }

    /** Keeps the first {@code n} positions (a prefix shared with the next request) and forgets the rest. */
    void truncate(int n);

    @Override
    void close();
}
