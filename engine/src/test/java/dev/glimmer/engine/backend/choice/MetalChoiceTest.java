package dev.glimmer.engine.backend.choice;

import static dev.glimmer.engine.backend.SequencePool.Readout.GREEDY;
import static dev.glimmer.engine.backend.SequencePool.Readout.LOGITS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.metal.FakeObjcRuntime;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.DisabledOnOs;
import org.junit.jupiter.api.condition.OS;

/**
 * What the backend choice and {@code selftest --backend metal} say when Metal fails on a Mac, driven
 * through the real Metal classes over the stand-in runtime (which compiles nothing and computes
 * nothing): the choice falls back to the CPU with one line naming the failed step, the self-test
 * prints the step and Metal's whole message. Not on macOS, for the stand-in's reason
 * ({@code MetalOverFakeRuntimeTest}).
 */
@DisabledOnOs(OS.MAC)
class MetalChoiceTest {

    /** A Metal compiler message: the error, the source line, the caret, the count. */
    private static final String COMPILE_ERROR = """
            matvec.metal:30:5: error: use of undeclared identifier 'oops'
                oops;
                ^
            1 error generated.""";

    // Each test configures the fake runtime, lets MetalChoice choose and reads its reason: the form repeats by design.
    @Test
    void kernelsThatDoNotCompileLeaveTheCpuWithTheFirstLineAndTheSelfTestPrintsAll() throws Throwable {
        FakeObjcRuntime fake = FakeObjcRuntime.configure("Fake Apple M2", 8, COMPILE_ERROR);
        try (GlmModel model = GlmModel.open(Oracle.model("tiny-q4_0"));
                BackendChoice choice = MetalChoice.choose(model, true, Backends.CpuOptions.DEFAULT, fake::openDevice)) {
            assertEquals("cpu", choice.name());
            assertEquals(
                    "Metal is not usable: compiling the kernels: kernel mat_vec: matvec.metal:30:5: error: use of"
                            + " undeclared identifier 'oops' (3 more lines: ./glimmer selftest --backend metal prints them)",
                    choice.reason());
        }
        assertEquals(0, fake.liveOwned());

        SelfTest.Report report = MetalChoice.selfTest(fake::openDevice);
        assertFalse(report.passed());
        assertEquals(
                "FAIL compiling the kernels: kernel mat_vec: " + COMPILE_ERROR + "\nmetal self-test FAILED\n",
                report.text());
        assertEquals(0, fake.liveOwned());
    }

    @Test
    void aVirtualMachinesGpuIsRefusedWithTheReason() throws Throwable {
        FakeObjcRuntime vm = FakeObjcRuntime.configure("Apple Paravirtual device", 5, null);
        String reason = "opening the Metal device: Apple Paravirtual device is of GPU family Apple5; the kernels need"
                + " Apple7 (M1) or later for their SIMD-group reductions (a macOS virtual machine's paravirtual GPU"
                + " lacks them: run Glimmer on the Mac itself)";
        try (GlmModel model = GlmModel.open(Oracle.model("tiny-q4_0"));
                BackendChoice choice = MetalChoice.choose(model, true, Backends.CpuOptions.DEFAULT, vm::openDevice)) {
            assertEquals("cpu", choice.name());
            assertEquals("Metal is not usable: " + reason, choice.reason());
        }
        assertEquals(
                "FAIL " + reason + "\nmetal self-test FAILED\n",
                MetalChoice.selfTest(vm::openDevice).text());
        assertEquals(0, vm.liveOwned());
    }

    @Test
    void aGpuStepThatFailsIsReportedAsTheRunningStep() throws Throwable {
        FakeObjcRuntime fake =
                FakeObjcRuntime.configure("Fake Apple M3", 9, null).failing("commandBuffer", 1);
        SelfTest.Report report = MetalChoice.selfTest(fake::openDevice);
        assertEquals(
                "FAIL running a step on the GPU: computeCommandEncoder sent to nil\n"
                        + "metal on Fake Apple M3 (Apple9, INDIRECT) self-test FAILED\n",
                report.text());
        assertEquals(0, fake.liveOwned());

        FakeObjcRuntime again =
                FakeObjcRuntime.configure("Fake Apple M3", 9, null).failing("commandBuffer", 1);
        try (GlmModel model = GlmModel.open(Oracle.model("tiny-q4_0"));
                BackendChoice choice =
                        MetalChoice.choose(model, true, Backends.CpuOptions.DEFAULT, again::openDevice)) {
            assertEquals("cpu", choice.name());
            assertEquals(
                    "Metal on Fake Apple M3 (Apple9, INDIRECT) failed its self-test: running a step on the GPU:"
                            + " computeCommandEncoder sent to nil",
                    choice.reason());
        }
        assertEquals(0, again.liveOwned());
    }

    /** The stand-in computes nothing, so its logits are all zero: the self-test must catch that, and the CPU serve. */
    @Test
    void wrongLogitsFailTheSelfTestAndTheCpuServesSayingWhichCheckFailed() throws Throwable {
        FakeObjcRuntime fake = FakeObjcRuntime.configure("Fake Apple M1", 7, null);
        try (GlmModel model = GlmModel.open(Oracle.model("tiny-q4_0"));
                BackendChoice choice = MetalChoice.choose(model, true, Backends.CpuOptions.DEFAULT, fake::openDevice)) {
            assertEquals("cpu", choice.name());
            assertTrue(
                    choice.reason()
                            .startsWith("Metal on Fake Apple M1 (Apple7, INDIRECT_WITH_EMPTY_DISPATCHES) failed its"
                                    + " self-test: FAIL tiny-f32 decode step: max |Δlogit| "),
                    choice.reason());
            assertFalse(choice.reason().contains("\n"), choice.reason());
            assertTrue(choice.selfTest().orElseThrow().text().endsWith("metal self-test FAILED\n"));
        }
        assertEquals(0, fake.liveOwned());

        FakeObjcRuntime trusted = FakeObjcRuntime.configure("Fake Apple M1", 7, null);
        try (GlmModel model = GlmModel.open(Oracle.model("tiny-q4_0"));
                BackendChoice choice =
                        MetalChoice.choose(model, false, Backends.CpuOptions.DEFAULT, trusted::openDevice)) {
            assertEquals("metal", choice.name());
            assertEquals(
                    "Metal on Fake Apple M1 (Apple7, INDIRECT_WITH_EMPTY_DISPATCHES), self-test skipped",
                    choice.reason());
            try (SequencePool pool = choice.pool(1, 8);
                    SequencePool.Sequence sequence = pool.open()) {
                assertEquals(
                        model.vocabSize(),
                        pool.prompt(sequence, new int[] {5}, 0, 1, LOGITS).logits().length);
            }
            // The server's pool: one KV pool whose slot is what the KV budget counts per conversation.
            try (SequencePool pool = choice.pool(3, 8)) {
                assertEquals(3, pool.slots());
                assertEquals(choice.pools().bytesPerSequence(8), pool.bytesPerSequence());
                SequencePool.Sequence a = pool.open();
                SequencePool.Sequence b = pool.open();
                pool.prompt(a, new int[] {5, 6}, 0, 2, LOGITS);
                SequencePool.Next[] next =
                        pool.step(List.of(a, b), new int[] {7, 8}, new SequencePool.Readout[] {LOGITS, GREEDY});
                assertEquals(model.vocabSize(), next[0].logits().length);
                assertEquals(List.of(3, 1), List.of(a.position(), b.position()));
                assertEquals(2, pool.inUse());
                a.close();
                b.close();
            }
        }
        assertEquals(0, trusted.liveOwned());
    }
}
