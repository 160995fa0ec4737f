package dev.glimmer.engine.backend.cpu;

import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorShuffle;
import jdk.incubator.vector.VectorSpecies;

/**
 * Shuffles that move a vector's upper half into its lower half (lane i takes lane i + n/2), one per shape the CPU
 * kernels fold or widen: {@code v.rearrange(D512).reinterpretShape(DoubleVector.SPECIES_256, 0)} is
 * {@code v.reinterpretShape(DoubleVector.SPECIES_256, 1)} lane for lane, and likewise for {@code convertShape}'s
 * second part.
 *
 * <p>Why not the library's part 1: it slices the vector through code shared by every shape (an iota shuffle made by
 * a call that C2 dispatches on one receiver profile for all of them). In a JVM that has run the kernels on several
 * shapes (a server that also runs prompts, or the engine's test suite) that profile sees more classes than C2
 * inlines for, the call stays virtual and each fold boxes its vector: {@code DecodeAllocationTest} saw 576,000 bytes
 * allocated per decoded token on CI, about one 512-bit vector per dot product. A rearrange by a constant shuffle
 * has no such call.
 */
final class UpperHalves {
    static final VectorShuffle<Double> D256 = of(DoubleVector.SPECIES_256);
    static final VectorShuffle<Double> D512 = of(DoubleVector.SPECIES_512);
    static final VectorShuffle<Float> F256 = of(FloatVector.SPECIES_256);
    static final VectorShuffle<Float> F512 = of(FloatVector.SPECIES_512);
    static final VectorShuffle<Integer> I256 = of(IntVector.SPECIES_256);
    static final VectorShuffle<Integer> I512 = of(IntVector.SPECIES_512);
    static final VectorShuffle<Short> S128 = of(ShortVector.SPECIES_128);
    static final VectorShuffle<Short> S256 = of(ShortVector.SPECIES_256);

    private UpperHalves() {}

    private static <E> VectorShuffle<E> of(VectorSpecies<E> species) {
        int n = species.length();
        return VectorShuffle.fromOp(species, i -> (i + n / 2) % n);
    }
}
