package dev.glimmer.engine.backend.metal;

/** A Metal call that failed, with Metal's own message (an NSError's description) where it gave one. */
public final class MetalException extends RuntimeException {

    public MetalException(String message) {
        super(message);
    }
}
