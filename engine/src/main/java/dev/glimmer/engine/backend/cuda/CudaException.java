package dev.glimmer.engine.backend.cuda;

/** A CUDA driver or NVRTC call failed; the message names the call and the library's own error text. */
public final class CudaException extends RuntimeException {
    public CudaException(String message) {
        super(message);
    }
}
