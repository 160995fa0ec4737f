package dev.glimmer.server.inference;

/**
 * A GPU's KV pool and the rest of what serving needs do not fit the memory its device offers; the message is one
 * line saying what to change ({@link dev.glimmer.kernels.decode.MemoryBudget#doesNotFit}).
 */
final class PoolDoesNotFitException extends RuntimeException {
    PoolDoesNotFitException(String message) {
        super(message);
    }
}
