package dev.glimmer.engine.backend.commandlist;

import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.kernels.decode.CommandList;

/**
 * A pool that can run the first dispatches of a decode step and show a buffer: how the self-test finds the first
 * layer (and so the kernels) where a GPU leaves the CPU's path.
 */
public interface LayerProbe {

    /** The decode command list the steps run. */
    CommandList commandList();

    /**
     * Runs the first {@code dispatches} dispatches of the decode step of {@code token} at position {@code at} of
     * {@code sequence}, a position already decoded with that token (its cache rows are rewritten with the same values),
     * and returns {@code count} floats of list buffer {@code buffer} from byte {@code offset}. The position does not move.
     */
    float[] partialStep(
            SequencePool.Sequence sequence, int token, int at, int dispatches, int buffer, long offset, int count);
}
