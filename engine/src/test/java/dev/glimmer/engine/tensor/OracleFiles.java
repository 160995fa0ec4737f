package dev.glimmer.engine.tensor;

import dev.glimmer.engine.gguf.GgufFile;
import dev.glimmer.engine.gguf.TensorInfo;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;

/** Opening the oracle GGUF files that the tests copy into their resources. */
final class OracleFiles {

    private OracleFiles() {}

    static GgufFile open(String name) throws IOException {
        return GgufFile.open(Path.of("src/test/resources/oracle", name));
    }

    /** All values of an F32 tensor, in file order. */
    static float[] f32Values(GgufFile file, TensorInfo t) {
        if (t.type() != GgmlType.F32) {
            throw new IllegalArgumentException(t + " is not F32");
        }
        MemorySegment data = file.data(t);
        float[] values = new float[(int) t.elements()];
        MemorySegment.copy(data, Blocks.FLOAT_LE, 0, values, 0, values.length);
        return values;
    }
}
