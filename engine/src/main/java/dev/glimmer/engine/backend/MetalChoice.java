package dev.glimmer.engine.backend;

import dev.glimmer.engine.backend.emulated.DecodeModels;
import dev.glimmer.engine.backend.metal.MetalDecoder;
import dev.glimmer.engine.backend.metal.MetalDevice;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.kernels.decode.DecodeCommandListBuilder;

import java.util.Optional;

/** The macOS half of {@link Backends}: opens the device, checks the model and runs the self-test; falls back to the CPU. */
final class MetalChoice {

    private MetalChoice() {
    }

    /** The self-test on the system's Metal device. */
    static SelfTest.Report selfTest() {
        try (MetalDevice device = MetalDevice.open()) {
            return SelfTest.run("metal on " + device.name() + " (" + device.mode() + ")",
                    (m, capacity) -> new MetalDecoder(device, m, capacity));
        }
    }

    static BackendChoice choose(GlmModel model, boolean selfTest) {
        try {
            DecodeCommandListBuilder.build(DecodeModels.of(model.file(), model.config()), 1);
        } catch (RuntimeException e) {
            return Backends.cpu(model, "the GPU decode step cannot run this model: " + e.getMessage());
        }
        MetalDevice device;
        try {
            device = MetalDevice.open();
        } catch (RuntimeException e) {
            return Backends.cpu(model, "Metal is not usable: " + e.getMessage());
        }
        String what = "Metal on " + device.name() + " (" + device.mode() + ")";
        Optional<SelfTest.Report> report = Optional.empty();
        if (selfTest) {
            SelfTest.Report r;
            try {
                r = SelfTest.run("metal", (m, capacity) -> new MetalDecoder(device, m, capacity));
            } catch (RuntimeException e) {
                device.close();
                return Backends.cpu(model, what + " failed its self-test: " + e.getMessage());
            }
            if (!r.passed()) {
                device.close();
                return Backends.cpu(model, what + " failed its self-test: " + r.firstFailure(), Optional.of(r));
            }
            report = Optional.of(r);
        }
        return new BackendChoice(BackendKind.METAL, what + (selfTest ? ", self-test passed" : ", self-test skipped"), report,
                new BackendChoice.Decoders() {
                    @Override
                    public MetalDecoder open(int capacity) {
                        return new MetalDecoder(device, model, capacity);
                    }

                    @Override
                    public void close() {
                        device.close();
                    }
                });
    }
}
