package dev.glimmer.engine.backend;

import dev.glimmer.engine.kv.KvCacheType;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.util.Arrays;
import java.util.function.IntFunction;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link TokenDecoder#truncate}, what the server's session reuse relies on, on the CPU decoder and on
 * the GPU decode step (on the kernel emulator; {@link CudaTruncateTest} on a CUDA device): a sequence
 * cut back to a shared prefix and continued with other tokens computes exactly what a fresh sequence
 * fed the prefix and those tokens computes.
 */
class TokenDecoderTruncateTest {
    /** The oracle model the checks run on. */
    static final String MODEL = "tiny-q8_0";
    private static final int CAPACITY = 16;
    private static final int KEPT = 5;

    private static TokenDecoder open(String backend, GlmModel model, int capacity) {
        return switch (backend) {
            case "cpu" -> new CpuDecoder(model, capacity, KvCacheType.F32);
            case "emulated" -> new EmulatedTokenDecoder(model, capacity);
            default -> throw new IllegalArgumentException(backend);
        };
    }

    @ParameterizedTest
    @ValueSource(strings = {"cpu", "emulated"})
    void aTruncatedSequenceContinuesAsAFreshOneWouldWithTheSamePrefix(String backend) throws IOException {
        try (GlmModel model = GlmModel.open(Oracle.model(MODEL))) {
            truncatedSequenceContinuesAsAFreshOne(capacity -> open(backend, model, capacity));
        }
    }

    /** The memory a sequence reports grows with its capacity (the KV cache is most of it). */
    @ParameterizedTest
    @ValueSource(strings = {"cpu", "emulated"})
    void bytesGrowWithTheCapacity(String backend) throws IOException {
        try (GlmModel model = GlmModel.open(Oracle.model(MODEL))) {
            bytesGrowWithCapacity(model, capacity -> open(backend, model, capacity));
        }
    }

    /** The check of {@link #aTruncatedSequenceContinuesAsAFreshOneWouldWithTheSamePrefix} on {@link #MODEL}'s decoders from {@code open}. */
    static void truncatedSequenceContinuesAsAFreshOne(IntFunction<TokenDecoder> open) {
        int[] prompt = Arrays.copyOf(Oracle.chatCase(MODEL).promptTokens(), 8);
        // The same prefix, then three other tokens in place of the prompt's last three.
        int[] other = prompt.clone();
        other[KEPT] = prompt[KEPT + 2];
        other[KEPT + 1] = prompt[KEPT];
        other[KEPT + 2] = prompt[KEPT + 1];
        float[] expected;
        try (TokenDecoder fresh = open.apply(CAPACITY)) {
            expected = fresh.forward(other, 0, other.length).clone();
        }
        try (TokenDecoder reused = open.apply(CAPACITY)) {
            float[] first = reused.forward(prompt, 0, prompt.length).clone();
            assertEquals(prompt.length, reused.position());
            reused.truncate(KEPT);
            assertEquals(KEPT, reused.position());
            float[] got = reused.forward(other, KEPT, other.length - KEPT);
            assertEquals(other.length, reused.position());
            assertArrayEquals(expected, got);
            assertTrue(!Arrays.equals(first, got), "the other tokens give other logits");

            assertThrows(IllegalArgumentException.class, () -> reused.truncate(other.length + 1));
            assertThrows(IllegalArgumentException.class, () -> reused.truncate(-1));
            reused.truncate(0);
            assertEquals(0, reused.position());
        }
    }

    /** The check of {@link #bytesGrowWithTheCapacity} on {@code model}'s decoders from {@code open}. */
    static void bytesGrowWithCapacity(GlmModel model, IntFunction<TokenDecoder> open) {
        try (TokenDecoder small = open.apply(CAPACITY); TokenDecoder large = open.apply(2 * CAPACITY)) {
            long perPosition = (long) model.config().layers() * model.config().kvRowWidth() * 4;
            assertTrue(small.bytes() >= CAPACITY * perPosition, small.bytes() + " bytes");
            assertTrue(large.bytes() - small.bytes() >= CAPACITY * perPosition,
                    small.bytes() + " and " + large.bytes() + " bytes");
        }
    }
}
