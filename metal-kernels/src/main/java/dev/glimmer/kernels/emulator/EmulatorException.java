package dev.glimmer.kernels.emulator;

/** A dispatch the emulator could not complete: a deadlock or divergent collective, with where each thread waits. */
public final class EmulatorException extends RuntimeException {

    public EmulatorException(String message) {
        super(message);
    }
}
