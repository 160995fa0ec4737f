package dev.glimmer.engine.backend.metal;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.backend.GpuTokenDecoder;
import dev.glimmer.engine.backend.PartialSteps;
import dev.glimmer.engine.backend.emulated.DecodeModels;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.kernels.ArgStruct;
import dev.glimmer.kernels.KernelLibrary;
import dev.glimmer.kernels.decode.BufferSpec;
import dev.glimmer.kernels.decode.CommandList;
import dev.glimmer.kernels.decode.DecodeCommandListBuilder;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * One sequence decoded on the GPU: the decode command list of the model, its buffers (weights as
 * no-copy views of the mapped file, kept resident with a residency set where macOS has them, the
 * rest in shared storage) and the step encoded once. Each
 * token writes the step buffer, runs the step and reads the logits; the prompt goes through the
 * same step token by token (there is no batched prompt command list yet).
 */
public final class MetalDecoder implements GpuTokenDecoder, PartialSteps {

    private final MetalDevice device;
    private final ObjcRuntime rt;
    private final GlmModel model;
    private final CommandList list;
    private final List<MemorySegment> buffers = new ArrayList<>();
    private final StepEncoder encoder;
    private final MemorySegment residency;
    private final MemorySegment step;
    private final MemorySegment activations;
    private final ArgStruct stepArgs = KernelLibrary.load().struct("StepArgs");
    private final int capacity;
    private final int vocab;
    private int position;

    /**
     * @throws InvalidInputException when the model's shape is one the GPU decode step does not handle
     * @throws MetalException        when Metal refuses a buffer or the command buffer
     */
    public MetalDecoder(MetalDevice device, GlmModel model, int capacity) {
        this.device = device;
        this.rt = device.runtime();
        this.model = model;
        this.capacity = capacity;
        this.vocab = model.vocabSize();
        try {
            this.list = DecodeCommandListBuilder.build(DecodeModels.of(model.file(), model.config()), capacity);
        } catch (IllegalArgumentException e) {
            throw new InvalidInputException(model.file().path().getFileName() + ": " + e.getMessage());
        }
        StepEncoder built = null;
        MemorySegment resident = MemorySegment.NULL;
        try (ObjcRuntime.AutoreleasePool pool = rt.autoreleasePool()) {
            long base = model.file().mapping().address();
            List<MemorySegment> weights = new ArrayList<>();
            for (BufferSpec b : list.buffers()) {
                MemorySegment buffer = b.kind() == BufferSpec.Kind.WEIGHTS ? device.wrap(base + b.fileOffset(), b.bytes())
                        : device.newSharedBuffer(b.bytes());
                buffers.add(buffer);
                if (b.kind() == BufferSpec.Kind.WEIGHTS) {
                    weights.add(buffer);
                }
            }
            MemorySegment args = buffers.get(list.buffer(BufferSpec.Kind.ARGS));
            MemorySegment.copy(list.args(), 0, device.contents(args, list.args().length), ValueLayout.JAVA_BYTE, 0,
                    list.args().length);
            this.step = device.contents(buffers.get(list.buffer(BufferSpec.Kind.STEP)), stepArgs.size());
            BufferSpec act = list.buffers().get(list.buffer(BufferSpec.Kind.ACTIVATIONS));
            this.activations = device.contents(buffers.get(list.buffer(BufferSpec.Kind.ACTIVATIONS)), act.bytes());
            built = new StepEncoder(device.calls(), list, buffers, device.pipelines(), device.mode());
            resident = device.keepResident(weights);
        } catch (RuntimeException e) {
            if (built != null) {
                rt.release(built.indirectCommandBuffer());
            }
            releaseBuffers();
            throw e;
        }
        this.encoder = built;
        this.residency = resident;
    }

    @Override
    public CommandList commandList() {
        return list;
    }

    @Override
    public float[] forward(int[] tokens, int from, int count) {
        if (count <= 0) {
            throw new IllegalArgumentException("no tokens to run");
        }
        if (position + count > capacity) {
            throw new InvalidInputException("the context of " + capacity + " positions has room for "
                    + (capacity - position) + " more tokens, not " + count);
        }
        float[] logits = null;
        for (int i = from; i < from + count; i++) {
            logits = step(tokens[i]);
        }
        return logits;
    }

    private float[] step(int token) {
        run(token, position, list.dispatches().size());
        position++;
        return activations.asSlice(list.logits(), 4L * vocab).toArray(ValueLayout.JAVA_FLOAT);
    }

    private void run(int token, int at, int dispatches) {
        if (token < 0 || token >= model.weights().tokenEmbedding().rows()) {
            throw new InvalidInputException("token id " + token + " is outside the vocabulary");
        }
        byte[] args = stepArgs.pack(Map.of("token", token, "pos", at, "kv_len", at + 1));
        MemorySegment.copy(args, 0, step, ValueLayout.JAVA_BYTE, 0, args.length);
        try (ObjcRuntime.AutoreleasePool pool = rt.autoreleasePool()) {
            encoder.run(device.queue(), dispatches);
        }
    }

    @Override
    public float[] partialStep(int token, int at, int dispatches, int buffer, long offset, int count) {
        if (at >= position) {
            throw new IllegalArgumentException("position " + at + " has not been decoded yet");
        }
        run(token, at, dispatches);
        return device.contents(buffers.get(buffer), offset + 4L * count).asSlice(offset)
                .toArray(ValueLayout.JAVA_FLOAT);
    }

    @Override
    public int greedyToken() {
        return activations.get(ValueLayout.JAVA_INT, list.token());
    }

    @Override
    public int position() {
        return position;
    }

    @Override
    public int capacity() {
        return capacity;
    }

    @Override
    public void truncate(int n) {
        if (n < 0 || n > position) {
            throw new IllegalArgumentException("cannot truncate a sequence of " + position + " positions to " + n);
        }
        position = n;
    }

    /** The shared-storage buffers of this sequence (the weights are no-copy views of the mapped file). */
    @Override
    public long bytes() {
        return list.buffers().stream().filter(b -> b.kind() != BufferSpec.Kind.WEIGHTS).mapToLong(BufferSpec::bytes).sum();
    }

    private void releaseBuffers() {
        for (MemorySegment b : buffers) {
            rt.release(b);
        }
        buffers.clear();
    }

    @Override
    public void close() {
        device.endResidency(residency);
        rt.release(encoder.indirectCommandBuffer());
        releaseBuffers();
    }
}
