package dev.glimmer.engine.backend;

import dev.glimmer.kernels.decode.CommandList;

/**
 * A GPU decoder that can run the first dispatches of a step and show a buffer: how the self-test
 * finds the first layer (and so the kernels) where the GPU leaves the CPU's path.
 */
public interface PartialSteps {

    /** The decode command list the steps run. */
    CommandList commandList();

    /**
     * Runs the first {@code dispatches} dispatches of the step of {@code token} at {@code position},
     * a position already decoded with that token (its cache rows are rewritten with the same values),
     * and returns {@code count} floats of list buffer {@code buffer} from byte {@code offset}.
     */
    float[] partialStep(int token, int position, int dispatches, int buffer, long offset, int count);
}
