package dev.glimmer.engine.backend.choice;

import dev.glimmer.engine.backend.BackendKind;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.SequencePools;
import dev.glimmer.engine.backend.commandlist.CommandListPool;
import dev.glimmer.engine.backend.commandlist.DecodeModels;
import dev.glimmer.engine.backend.metal.MetalDevice;
import dev.glimmer.engine.backend.metal.MetalException;
import dev.glimmer.engine.backend.metal.MetalIcbRunner;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.decode.DecodeCommandListBuilder;
import java.util.Optional;
import java.util.function.Supplier;

/**
 * The macOS half of {@link Backends}: opens the device, checks the model and runs the self-test; falls back to the CPU.
 * Whatever fails is reported with the step it failed in: in full by the self-test, in one line as the backend's reason
 * (the log and {@code /v1/models}).
 */
final class MetalChoice {

    /** The steps of failures that are no {@link MetalException}: opening the device, and decoding on it. */
    private static final String OPENING = "opening Metal";

    private static final String DECODING = "decoding the built-in models";

    private MetalChoice() {}

    /** The self-test on the system's Metal device. */
    static SelfTest.Report selfTest() {
        return selfTest(MetalDevice::open);
    }

    /** The self-test on the device {@code open} gives; a failure on the way is reported with its step. */
    static SelfTest.Report selfTest(Supplier<MetalDevice> open) {
        MetalDevice device;
        try {
            device = open.get();
        } catch (RuntimeException e) {
            return SelfTest.stopped("metal", step(e, OPENING), detail(e));
        }
        String what = "metal on " + device.describe();
        try (device) {
            return SelfTest.run(what, (m, capacity) -> pool(device, m, 1, capacity, 0));
        } catch (RuntimeException e) {
            return SelfTest.stopped(what, step(e, DECODING), detail(e));
        }
    }

    /**
     * {@code slots} sequences of {@code capacity} positions of {@code model} on {@code device}, drafting up to
     * {@code drafts} tokens a step.
     */
    private static CommandListPool pool(MetalDevice device, GlmModel model, int slots, int capacity, int drafts) {
        return new CommandListPool(
                model, new MetalIcbRunner(device, model), slots, capacity, Geometry.PROMPT_TOKENS, drafts);
    }

    static BackendChoice choose(GlmModel model, boolean selfTest, Backends.CpuOptions cpu) {
        return choose(model, selfTest, cpu, MetalDevice::open);
    }

    static BackendChoice choose(GlmModel model, boolean selfTest, Backends.CpuOptions cpu, Supplier<MetalDevice> open) {
        try {
            DecodeCommandListBuilder.build(DecodeModels.of(model.file(), model.config()), 1);
        } catch (RuntimeException e) {
            return Backends.cpu(model, cpu, "the GPU decode step cannot run this model: " + e.getMessage());
        }
        MetalDevice device;
        try {
            device = open.get();
        } catch (RuntimeException e) {
            return Backends.cpu(model, cpu, "Metal is not usable: " + oneLine(step(e, OPENING) + ": " + detail(e)));
        }
        String what = "Metal on " + device.describe();
        int drafts = CommandListPool.drafts(model, cpu.maxDrafts());
        Optional<SelfTest.Report> report = Optional.empty();
        if (selfTest) {
            SelfTest.Report r;
            try {
                r = SelfTest.run("metal", (m, capacity) -> pool(device, m, 1, capacity, 0));
            } catch (RuntimeException e) {
                device.close();
                return Backends.cpu(
                        model, cpu, what + " failed its self-test: " + oneLine(step(e, DECODING) + ": " + detail(e)));
            }
            if (!r.passed()) {
                device.close();
                return Backends.cpu(
                        model, cpu, what + " failed its self-test: " + oneLine(r.firstFailure()), Optional.of(r));
            }
            report = Optional.of(r);
        }
        return new BackendChoice(
                BackendKind.METAL,
                what + (selfTest ? ", self-test passed" : ", self-test skipped"),
                report,
                new SequencePools() {
                    /** Sequences in one KV pool, stepping together through the batch decode lists. */
                    @Override
                    public SequencePool pool(int slots, int capacity) {
                        return MetalChoice.pool(device, model, slots, capacity, drafts);
                    }

                    /** A slot of the KV pool (activations belong to the pool). */
                    @Override
                    public long bytesPerSequence(int capacity) {
                        return CommandListPool.bytesPerSequence(model, capacity, drafts > 0);
                    }

                    /** Metal's recommendedMaxWorkingSetSize: beyond it a command buffer may fail for memory. */
                    @Override
                    public Optional<SequencePools.DeviceMemory> deviceMemory() {
                        return Optional.of(new SequencePools.DeviceMemory(
                                device.name() + "'s recommendedMaxWorkingSetSize",
                                device.recommendedMaxWorkingSetSize(),
                                false));
                    }

                    @Override
                    public void close() {
                        device.close();
                    }
                });
    }

    /** The step {@code e} names, else {@code otherwise}. */
    private static String step(RuntimeException e, String otherwise) {
        return e instanceof MetalException m ? m.step().map(String::valueOf).orElse(otherwise) : otherwise;
    }

    private static String detail(RuntimeException e) {
        return e instanceof MetalException m ? m.detail() : String.valueOf(e.getMessage());
    }

    /** The first line of {@code text} (a compiler's message has many), saying where the rest is. */
    static String oneLine(String text) {
        String[] lines = text.strip().split("\\R");
        return lines.length == 1
                ? lines[0]
                : lines[0] + " (" + (lines.length - 1) + " more lines: ./glimmer selftest"
                        + " --backend metal prints them)";
    }
}
