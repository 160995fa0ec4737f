package dev.glimmer.engine.backend.cuda;

import dev.glimmer.engine.backend.KernelTimings;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.TokenDecoder;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * {@link SequencePool} on a CUDA device: one {@link CudaDecoder} (its KV pool, its graphs) whose sequences
 * step together through its batch decode graphs.
 */
public final class CudaSequencePool implements SequencePool {

    private final CudaDecoder decoder;

    /** {@code slots} sequences of {@code capacity} positions over {@code weights} (closed by the caller, after this pool). */
    public CudaSequencePool(CudaWeights weights, int slots, int capacity) {
        this.decoder = new CudaDecoder(weights, capacity, slots);
    }

    @Override
    public TokenDecoder open() {
        return new CudaTokenDecoder(decoder, decoder.open(), null);
    }

    @Override
    public int slots() {
        return decoder.slots();
    }

    @Override
    public long bytesPerSequence() {
        return decoder.kvBytesPerSequence();
    }

    @Override
    public int inUse() {
        return decoder.inUse();
    }

    /** Device memory of the KV pool and of every graph's activations and arguments. */
    @Override
    public long bytes() {
        return decoder.deviceBytes();
    }

    @Override
    public Next[] step(List<TokenDecoder> sequences, int[] tokens, Readout[] readouts) {
        return decoder.step(own(sequences), tokens, readouts);
    }

    @Override
    public Launched launch(List<TokenDecoder> sequences, int[] tokens, Readout[] readouts) {
        return decoder.launch(own(sequences), tokens, readouts);
    }

    @Override
    public Optional<KernelTimings.Profile> profileStep(List<TokenDecoder> sequences, int[] tokens) {
        return Optional.of(decoder.profileBatch(own(sequences), tokens));
    }

    private static List<CudaDecoder.Sequence> own(List<TokenDecoder> sequences) {
        List<CudaDecoder.Sequence> own = new ArrayList<>(sequences.size());
        for (TokenDecoder d : sequences) {
            if (!(d instanceof CudaTokenDecoder c)) {
                throw new IllegalArgumentException("a sequence of another backend in a CUDA step");
            }
            own.add(c.sequence());
        }
        return own;
    }

    @Override
    public void close() {
        decoder.close();
    }
}
