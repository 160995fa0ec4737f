package dev.glimmer.engine.backend;

import dev.glimmer.engine.backend.emulated.EmulatedDecoder;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.kernels.emulator.FiberOrder;

/**
 * The GPU decode step on the CPU kernel emulator, as a {@link TokenDecoder}: slow, but it runs the
 * same command list and kernels as Metal, so the self-test (and the server's tests of serving on a
 * GPU-style decoder) can check the GPU path where there is no GPU. Needs clang-19 to build the emulator.
 */
public final class EmulatedTokenDecoder implements GpuTokenDecoder {

    /**
     * Tokens of a prompt batch: fewer than a GPU's (the emulator runs every threadgroup of a batch, used
     * or not), but enough that prompts span several batches, the last one partly used.
     */
    static final int PROMPT_TOKENS = 4;

    private final EmulatedDecoder decoder;
    private final int capacity;

    public EmulatedTokenDecoder(GlmModel model, int capacity) {
        this.decoder = new EmulatedDecoder(model, capacity, FiberOrder.inOrder(), PROMPT_TOKENS);
        this.capacity = capacity;
    }

    @Override
    public float[] forward(int[] tokens, int from, int count) {
        return count == 1 ? decoder.step(tokens[from]) : decoder.prompt(tokens, from, count);
    }

    // From here, plain delegation to the EmulatedDecoder, as CudaTokenDecoder delegates to its CudaDecoder.
    @Override
    public int greedyToken() {
        return decoder.greedyToken();
    }

    @Override
    public int position() {
        return decoder.position();
    }

    @Override
    public int capacity() {
        return capacity;
    }

    @Override
    public void truncate(int n) {
        decoder.truncate(n);
    }

    @Override
    public long bytes() {
        return decoder.bytes();
    }

    @Override
    public void close() {
        decoder.close();
    }
}
