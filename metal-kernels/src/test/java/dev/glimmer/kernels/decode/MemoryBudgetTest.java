package dev.glimmer.kernels.decode;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The GPU memory of serving the full-size Q4_0 model (DecodeCommandListTest's), per part. */
class MemoryBudgetTest {

    private static final DecodeModel FULL = DecodeCommandListTest.fullSizeModel();

    @Test
    void aCachedTokenTakesNoMoreThanLlamaCppsF16Cache() {
        MemoryBudget b = MemoryBudget.of(FULL, 4096, 2);
        assertEquals(576L * 2 * 47, b.kvBytesPerToken());
        assertEquals(576L * 2 * 47 * 4096 * 2, b.kvPool());
        assertEquals(b.weights() + b.kvPool() + b.activations(), b.total());
        // the file's weight ranges: every tensor, from the page the first one starts on
        assertTrue(b.weights() > 16e9 && b.weights() < 18e9, b.weights() + "");
        // activations do not grow with the context, only with the batch lists of more slots
        assertEquals(b.activations(), MemoryBudget.of(FULL, 8192, 2).activations());
        assertTrue(MemoryBudget.of(FULL, 4096, 16).activations() > b.activations());
    }

    /** A 65,536-token conversation beside the Q4_0 weights in 24 GB; three of them (serve's default pool) do not fit. */
    @Test
    void a64kConversationFitsIn24Gb() {
        long gpu = 24_000_000_000L;
        MemoryBudget one = MemoryBudget.of(FULL, 65536, 1);
        assertTrue(one.fits(gpu, false), one.parts(false));
        MemoryBudget pool = MemoryBudget.of(FULL, 65536, MemoryBudget.poolSlots(1));
        assertFalse(pool.fits(gpu, false));
        assertEquals(1, pool.slotsThatFit(gpu, false));
        String message = pool.doesNotFit("the GPU", gpu, false);
        assertTrue(message.startsWith("the GPU offers 24.00 GB, but 3 conversations of 65,536 tokens need"), message);
        assertTrue(
                message.endsWith(": lower --parallel to 1, or --ctx to "
                        + String.format("%,d", pool.contextThatFits(gpu, false))),
                message);
        // serving sizes the pool down to what fits, but never below --parallel
        MemoryBudget served = MemoryBudget.forServing(FULL, 65536, 1, gpu, false);
        assertEquals(1, served.slots());
        assertTrue(served.fits(gpu, false));
        assertEquals(2, MemoryBudget.forServing(FULL, 65536, 2, gpu, false).slots());
        assertEquals(3, MemoryBudget.forServing(FULL, 65536, 1, -1, false).slots()); // memory unknown
        // with the weights already on the device (CUDA's free memory after the upload) only the pool counts
        assertTrue(one.fits(gpu - one.weights(), true));
        assertFalse(pool.fits(gpu - one.weights(), true));
    }

    /** GLM-4.7-Flash's whole context in one conversation fits an H200 (141 GB), with serve's pool of three. */
    @Test
    void theFullContextFitsAnH200() {
        MemoryBudget b = MemoryBudget.forServing(FULL, 202_752, 1, 141_000_000_000L, false);
        assertEquals(3, b.slots());
        assertTrue(b.fits(141_000_000_000L, false), b.parts(false));
    }

    @Test
    void weightsThatDoNotFitSayWhatToDo() {
        MemoryBudget b = MemoryBudget.of(FULL, 4096, 1);
        String message = b.doesNotFit("Apple M2 (recommendedMaxWorkingSetSize)", 10_000_000_000L, false);
        assertTrue(
                message.endsWith("the weights alone do not fit; use a smaller quantization or --backend cpu"), message);
    }
}
