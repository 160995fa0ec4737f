package dev.glimmer.engine.backend.metal;

import dev.glimmer.engine.backend.commandlist.CommandListPool;
import dev.glimmer.engine.backend.commandlist.ListRunner;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.kernels.decode.BufferSpec;
import dev.glimmer.kernels.decode.CommandList;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The command lists of a {@link CommandListPool} on Metal: each list encoded once ({@link StepEncoder}: an indirect
 * command buffer per list, as CUDA captures a graph per list) over the weights as no-copy views of the mapped file
 * (kept resident with a residency set where macOS has them), the KV pool every list shares, and the list's own
 * activations, arguments and step buffer in shared storage. A run executes the list in one command buffer and waits;
 * its results lie in shared memory, read with a copy.
 *
 * <p>Not thread-safe: one caller at a time.
 */
public final class MetalIcbRunner implements ListRunner {

    private final MetalDevice device;
    private final ObjcRuntime rt;
    private final long fileBase;
    /** Every buffer this runner made (the lists share the weights and the KV pool). */
    private final List<MemorySegment> owned = new ArrayList<>();
    /** The weights and KV buffers, shared by every list. */
    private final Map<BufferSpec, MemorySegment> shared = new HashMap<>();

    private final List<StepEncoder> encoders = new ArrayList<>();
    private final Arena arena = Arena.ofShared();
    private MemorySegment residency = MemorySegment.NULL;
    private boolean closed;

    /** Lists of {@code model} on {@code device} (which the caller closes, after this runner). */
    public MetalIcbRunner(MetalDevice device, GlmModel model) {
        this.device = device;
        this.rt = device.runtime();
        this.fileBase = model.file().mapping().address();
    }

    /**
     * Makes the buffers of {@code list} and encodes it; the first list's weights are then kept resident.
     *
     * @throws MetalException when Metal refuses a buffer or an encoding
     */
    @Override
    public Bound bind(CommandList list) {
        try (ObjcRuntime.AutoreleasePool pool = rt.autoreleasePool()) {
            List<MemorySegment> buffers = new ArrayList<>();
            for (BufferSpec b : list.buffers()) {
                boolean sharedKind =
                        b.kind() == BufferSpec.Kind.WEIGHTS || b.kind().pooled();
                MemorySegment buffer = sharedKind ? shared.get(b) : null;
                if (buffer == null) {
                    buffer = MetalException.during(
                            MetalException.Step.BUFFERS,
                            () -> b.kind() == BufferSpec.Kind.WEIGHTS
                                    ? device.wrap(fileBase + b.fileOffset(), b.bytes())
                                    : device.newSharedBuffer(b.bytes()));
                    owned.add(buffer);
                    if (sharedKind) {
                        shared.put(b, buffer);
                    }
                }
                buffers.add(buffer);
            }
            MemorySegment args = buffers.get(list.buffer(BufferSpec.Kind.ARGS));
            MemorySegment.copy(
                    list.args(),
                    0,
                    device.contents(args, list.args().length),
                    ValueLayout.JAVA_BYTE,
                    0,
                    list.args().length);
            StepEncoder encoder = MetalException.during(
                    MetalException.Step.ENCODING,
                    () -> new StepEncoder(
                            device.calls(),
                            list,
                            buffers,
                            device.pipelines(),
                            device.maxThreadgroupMemory(),
                            device.mode()));
            encoders.add(encoder);
            if (encoders.size() == 1) {
                List<MemorySegment> weights = new ArrayList<>();
                for (int i = 0; i < list.buffers().size(); i++) {
                    if (list.buffers().get(i).kind() == BufferSpec.Kind.WEIGHTS) {
                        weights.add(buffers.get(i));
                    }
                }
                residency = MetalException.during(MetalException.Step.BUFFERS, () -> device.keepResident(weights));
            }
            MemorySegment step = buffers.get(list.buffer(BufferSpec.Kind.STEP));
            return new Bound() {
                @Override
                public void writeSteps(byte[] steps) {
                    MemorySegment.copy(
                            steps, 0, device.contents(step, steps.length), ValueLayout.JAVA_BYTE, 0, steps.length);
                }

                /** Executes the first dispatches in one command buffer and waits for it. */
                @Override
                public void run(int dispatches) {
                    try (ObjcRuntime.AutoreleasePool runPool = rt.autoreleasePool()) {
                        MetalException.during(MetalException.Step.RUNNING, () -> {
                            encoder.run(device.queue(), dispatches);
                            return null;
                        });
                    }
                }

                @Override
                public void read(int buffer, long offset, MemorySegment into) {
                    MemorySegment.copy(
                            device.contents(buffers.get(buffer), offset + into.byteSize()),
                            offset,
                            into,
                            0,
                            into.byteSize());
                }

                /** Shared memory: written here and now (every run has waited for its command buffer). */
                @Override
                public void write(int buffer, long offset, MemorySegment from) {
                    MemorySegment.copy(
                            from,
                            0,
                            device.contents(buffers.get(buffer), offset + from.byteSize()),
                            offset,
                            from.byteSize());
                }
            };
        }
    }

    @Override
    public MemorySegment hostBuffer(long bytes) {
        return arena.allocate(bytes, 64);
    }

    /** Every run has waited for its command buffer. */
    @Override
    public void finish() {}

    /** Every run has waited for its command buffer: nothing to wait for. */
    @Override
    public Fence fence() {
        return Fence.DONE;
    }

    /** Frees the indirect command buffers and buffers; once. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        if (!residency.equals(MemorySegment.NULL)) {
            device.endResidency(residency);
        }
        encoders.forEach(StepEncoder::close);
        for (MemorySegment b : owned) {
            rt.release(b);
        }
        owned.clear();
        arena.close();
    }
}
