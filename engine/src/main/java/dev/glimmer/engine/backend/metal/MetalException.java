package dev.glimmer.engine.backend.metal;

import java.util.Optional;
import java.util.function.Supplier;

/**
 * A Metal call that failed, with Metal's own message (an NSError's description) where it gave one,
 * and the step of bringing Metal up that failed, so that a Mac user's report says where it stopped.
 */
public final class MetalException extends RuntimeException {

    /** The steps from nothing to a decoded token, in order. */
    public enum Step {
        LOADING("loading libobjc and the Metal framework"),
        DEVICE("opening the Metal device"),
        COMPILING("compiling the kernels"),
        PIPELINES("making the compute pipelines"),
        BUFFERS("making the buffers"),
        ENCODING("encoding the command lists"),
        RUNNING("running a step on the GPU");

        private final String text;

        Step(String text) {
            this.text = text;
        }

        @Override
        public String toString() {
            return text;
        }
    }

    private final Step step;
    private final String detail;

    public MetalException(Step step, String detail) {
        super(step + ": " + detail);
        this.step = step;
        this.detail = detail;
    }

    /** A failure whose step the caller knows better (see {@link #during}). */
    MetalException(String detail) {
        super(detail);
        this.step = null;
        this.detail = detail;
    }

    /** The step that failed; empty for a failure not yet placed in one. */
    public Optional<Step> step() {
        return Optional.ofNullable(step);
    }

    /** What went wrong, without the step (may span lines: Metal's compiler messages do). */
    public String detail() {
        return detail;
    }

    /** Runs {@code work} as {@code step}: a failure not yet placed in a step is placed in this one. */
    static <T> T during(Step step, Supplier<T> work) {
        try {
            return work.get();
        } catch (MetalException e) {
            if (e.step != null) {
                throw e;
            }
            MetalException placed = new MetalException(step, e.detail);
            placed.initCause(e);
            throw placed;
        }
    }
}
