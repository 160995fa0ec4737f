package dev.glimmer.kernels;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class KernelParserTest {

    @Test
    void readsTheMatVecSignature() {
        KernelSignature k = KernelLibrary.load().kernel("mat_vec");
        assertEquals(
                new KernelParam("constant MatVecArgs &", "a", new KernelParam.Buffer(0)),
                k.params().get(0));
        assertEquals(
                new KernelParam("device const char *", "w", new KernelParam.Buffer(1)),
                k.params().get(1));
        assertEquals(
                new KernelParam("threadgroup float *", "scratch", new KernelParam.ThreadgroupMemory(0)),
                k.params().get(6));
        assertEquals(
                new KernelParam("ushort", "tiisg", new KernelParam.Builtin("thread_index_in_simdgroup")),
                k.params().get(9));
        assertEquals(6, k.bufferCount());
        assertEquals(1, k.threadgroupMemoryCount());
    }

    @Test
    void everyLibraryKernelStaysWithinMetalsBindingLimit() {
        for (KernelSignature k : KernelLibrary.load().kernels()) {
            assertTrue(k.bufferCount() <= 31, k.name() + " binds " + k.bufferCount() + " buffers");
        }
    }

    @Test
    void packsArgumentStructsByFieldName() {
        ArgStruct s = KernelParser.structs("struct TArgs { uint a; float b; int c, d; };")
                .getFirst();
        assertEquals(
                List.of("a", "b", "c", "d"),
                s.fields().stream().map(ArgStruct.Field::name).toList());
        byte[] b = s.pack(Map.of("a", 0xFFFF_FFFFL, "b", 1.0f, "c", -2, "d", 3));
        assertArrayEquals(new byte[] {-1, -1, -1, -1, 0, 0, -128, 63, -2, -1, -1, -1, 3, 0, 0, 0}, b);
        assertThrows(IllegalArgumentException.class, () -> s.pack(Map.of("a", 1)));
        assertThrows(IllegalArgumentException.class, () -> s.pack(Map.of("a", -1, "b", 1, "c", 1, "d", 1)));
    }

    @Test
    void rejectsParametersWithoutBinding() {
        IllegalArgumentException e = assertThrows(
                IllegalArgumentException.class,
                () -> KernelParser.kernels("kernel void k(device float * x [[buffer(0)]], uint n) {}"));
        assertTrue(e.getMessage().contains("kernel k: parameter 'uint n'"), e.getMessage());
    }
}
