package dev.glimmer.server.inference;

import dev.glimmer.engine.backend.BackendChoice;
import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.Backends;
import dev.glimmer.engine.model.GlmModel;

/**
 * Picks the backend a model runs on for {@code --backend}: {@link Backends#choose} in the commands;
 * tests substitute a GPU-style decoder that runs without a GPU (the kernel emulator).
 */
@FunctionalInterface
public interface BackendChooser {
    BackendChoice choose(BackendKind requested, GlmModel model);
}
