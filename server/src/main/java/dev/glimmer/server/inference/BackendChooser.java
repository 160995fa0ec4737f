package dev.glimmer.server.inference;

import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.choice.BackendChoice;
import dev.glimmer.engine.backend.choice.Backends;
import dev.glimmer.engine.model.GlmModel;

/**
 * Picks the backend a model runs on for {@code --backend}: {@link Backends#choose} in the commands;
 * tests substitute a GPU-style pool that runs without a GPU (the kernel emulator).
 */
@FunctionalInterface
public interface BackendChooser {
    /** The backend for {@code requested}; where that is the CPU, it computes as {@code cpu} says. */
    BackendChoice choose(BackendKind requested, GlmModel model, Backends.CpuOptions cpu);
}
