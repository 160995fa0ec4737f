package dev.glimmer.engine.tensor;

import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.gguf.TensorInfo;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.util.Optional;

import static org.junit.jupiter.api.Assertions.assertEquals;

class ScaleCheckTest {

    @Test
    void theOracleFilesHaveOnlyFiniteScales() throws Exception {
        for (String name : new String[] {"small-q4_k_m.gguf", "tiny-q4_0.gguf", "tiny-q8_0.gguf"}) {
            try (GgufFile file = OracleFiles.open(name)) {
                for (TensorInfo t : file.tensors()) {
                    assertEquals(Optional.empty(), ScaleCheck.firstNonFiniteScale(t.name(), t.type(), file.data(t)));
                }
            }
        }
    }

    @Test
    void namesTheTensorTheBlockTheFieldAndTheValue() throws Exception {
        try (GgufFile file = OracleFiles.open("small-q4_k_m.gguf")) {
            TensorInfo t = file.tensors().stream().filter(x -> x.type() == GgmlType.Q4_K).findFirst().orElseThrow();
            byte[] copy = file.data(t).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
            MemorySegment data = MemorySegment.ofArray(copy);

            data.set(Blocks.SHORT_LE, 5L * 144 + 2, (short) 0xFC00); // block 5: dmin = -Inf
            data.set(Blocks.SHORT_LE, 9L * 144, (short) 0x7E00); // block 9: d = NaN
            assertEquals(Optional.of("tensor " + t.name() + " block 5 has a non-finite scale dmin (-Inf)"),
                    ScaleCheck.firstNonFiniteScale(t.name(), t.type(), data));

            data.set(Blocks.SHORT_LE, 5L * 144 + 2, (short) 0x3C00);
            assertEquals(Optional.of("tensor " + t.name() + " block 9 has a non-finite scale d (NaN)"),
                    ScaleCheck.firstNonFiniteScale(t.name(), t.type(), data));
        }
    }

    @Test
    void q6KKeepsItsScaleAtTheEndOfTheBlock() {
        MemorySegment data = MemorySegment.ofArray(new byte[2 * 210]);
        data.set(Blocks.SHORT_LE, 210 + 208, (short) 0x7C00);
        assertEquals(Optional.of("tensor out block 1 has a non-finite scale d (+Inf)"),
                ScaleCheck.firstNonFiniteScale("out", GgmlType.Q6_K, data));
    }
}
