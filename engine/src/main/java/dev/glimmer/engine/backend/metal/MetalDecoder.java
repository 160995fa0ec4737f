package dev.glimmer.engine.backend.metal;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.backend.GpuTokenDecoder;
import dev.glimmer.engine.backend.PartialSteps;
import dev.glimmer.engine.backend.emulated.DecodeModels;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.kernels.ArgStruct;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.KernelLibrary;
import dev.glimmer.kernels.decode.BufferSpec;
import dev.glimmer.kernels.decode.CommandList;
import dev.glimmer.kernels.decode.DecodeCommandListBuilder;
import dev.glimmer.kernels.decode.DecodeModel;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

/**
 * One sequence decoded on the GPU: the decode command list and the prompt command list of the model,
 * their buffers (weights as no-copy views of the mapped file, kept resident with a residency set where
 * macOS has them; the KV cache shared by the two lists; the rest in shared storage) and each list encoded
 * once. A single token writes the step buffer, runs the decode step and reads the logits; a prompt runs
 * through the prompt command list, {@link Geometry#PROMPT_TOKENS} tokens at a time.
 */
public final class MetalDecoder implements GpuTokenDecoder, PartialSteps {

    private final MetalDevice device;
    private final ObjcRuntime rt;
    private final GlmModel model;
    private final ArgStruct stepArgs = KernelLibrary.load().struct("StepArgs");
    /** Every buffer this sequence made (the two lists share the weights and the KV cache). */
    private final List<MemorySegment> owned = new ArrayList<>();
    private final Encoded decode;
    private final Encoded prompt;
    private final MemorySegment residency;
    private final int capacity;
    private final int vocab;
    /** The list that ran last: its argmax holds the greedy token. */
    private Encoded last;
    private int position;

    /** A command list, its Metal buffers (same order as its BufferSpecs) and its encoding. */
    private record Encoded(CommandList list, List<MemorySegment> buffers, StepEncoder encoder, MemorySegment step,
                           MemorySegment activations) {
    }

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
        CommandList decodeList;
        CommandList promptList;
        try {
            DecodeModel shape = DecodeModels.of(model.file(), model.config());
            decodeList = DecodeCommandListBuilder.build(shape, capacity);
            promptList = DecodeCommandListBuilder.build(shape, capacity, Geometry.PROMPT_TOKENS);
        } catch (IllegalArgumentException e) {
            throw new InvalidInputException(model.file().path().getFileName() + ": " + e.getMessage());
        }
        Encoded d = null;
        Encoded p = null;
        MemorySegment resident = MemorySegment.NULL;
        try (ObjcRuntime.AutoreleasePool pool = rt.autoreleasePool()) {
            d = encode(decodeList, null);
            p = encode(promptList, d);
            List<MemorySegment> weights = new ArrayList<>();
            for (int i = 0; i < decodeList.buffers().size(); i++) {
                if (decodeList.buffers().get(i).kind() == BufferSpec.Kind.WEIGHTS) {
                    weights.add(d.buffers().get(i));
                }
            }
            resident = MetalException.during(MetalException.Step.BUFFERS, () -> device.keepResident(weights));
        } catch (RuntimeException e) {
            for (Encoded built : new Encoded[] {d, p}) {
                if (built != null) {
                    built.encoder().close();
                }
            }
            releaseBuffers();
            throw e;
        }
        this.decode = d;
        this.prompt = p;
        this.last = d;
        this.residency = resident;
    }

    /** Makes the buffers of {@code list} (the weights and KV cache as {@code shared}'s, where given) and encodes it. */
    private Encoded encode(CommandList list, Encoded shared) {
        long base = model.file().mapping().address();
        List<MemorySegment> buffers = new ArrayList<>();
        for (BufferSpec b : list.buffers()) {
            boolean sharedKind = b.kind() == BufferSpec.Kind.WEIGHTS || b.kind() == BufferSpec.Kind.KV_CACHE;
            if (shared != null && sharedKind) {
                buffers.add(shared.buffers().get(shared.list().buffers().indexOf(b)));
                continue;
            }
            MemorySegment buffer = MetalException.during(MetalException.Step.BUFFERS, () -> b.kind() == BufferSpec.Kind.WEIGHTS
                    ? device.wrap(base + b.fileOffset(), b.bytes()) : device.newSharedBuffer(b.bytes()));
            owned.add(buffer);
            buffers.add(buffer);
        }
        MemorySegment args = buffers.get(list.buffer(BufferSpec.Kind.ARGS));
        MemorySegment.copy(list.args(), 0, device.contents(args, list.args().length), ValueLayout.JAVA_BYTE, 0,
                list.args().length);
        MemorySegment step = device.contents(buffers.get(list.buffer(BufferSpec.Kind.STEP)),
                (long) list.tokens() * stepArgs.size());
        BufferSpec act = list.buffers().get(list.buffer(BufferSpec.Kind.ACTIVATIONS));
        MemorySegment activations = device.contents(buffers.get(list.buffer(BufferSpec.Kind.ACTIVATIONS)), act.bytes());
        StepEncoder encoder = MetalException.during(MetalException.Step.ENCODING, () -> new StepEncoder(device.calls(), list,
                buffers, device.pipelines(), device.maxThreadgroupMemory(), device.mode()));
        return new Encoded(list, buffers, encoder, step, activations);
    }

    /** The decode step's command list. */
    @Override
    public CommandList commandList() {
        return decode.list();
    }

    /** One token runs the decode step, more the prompt command list in batches; returns the last token's logits. */
    @Override
    public float[] forward(int[] tokens, int from, int count) {
        GpuTokenDecoder.checkRun(tokens, from, count, position, capacity, model.weights().tokenEmbedding().rows());
        Encoded list = count == 1 ? decode : prompt;
        for (int done = 0; done < count; ) {
            int n = Math.min(list.list().tokens(), count - done);
            run(list, tokens, from + done, n, position, list.list().dispatches().size());
            position += n;
            done += n;
        }
        return last.activations().asSlice(last.list().logits(), 4L * vocab).toArray(ValueLayout.JAVA_FLOAT);
    }

    /** Writes the StepArgs of {@code count} tokens from position {@code at} (the rest of the batch: none) and runs the list. */
    private void run(Encoded list, int[] tokens, int from, int count, int at, int dispatches) {
        byte[] args = list.list().steps(stepArgs, tokens, from, count, at, 0);
        MemorySegment.copy(args, 0, list.step(), ValueLayout.JAVA_BYTE, 0, args.length);
        try (ObjcRuntime.AutoreleasePool pool = rt.autoreleasePool()) {
            MetalException.during(MetalException.Step.RUNNING, () -> {
                list.encoder().run(device.queue(), dispatches);
                return null;
            });
        }
        last = list;
    }

    @Override
    public float[] partialStep(int token, int at, int dispatches, int buffer, long offset, int count) {
        if (at >= position) {
            throw new IllegalArgumentException("position " + at + " has not been decoded yet");
        }
        run(decode, new int[] {token}, 0, 1, at, dispatches);
        return device.contents(decode.buffers().get(buffer), offset + 4L * count).asSlice(offset)
                .toArray(ValueLayout.JAVA_FLOAT);
    }

    @Override
    public int greedyToken() {
        return last.activations().get(ValueLayout.JAVA_INT, last.list().token());
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
        long decodeBytes = decode.list().buffers().stream().filter(b -> b.kind() != BufferSpec.Kind.WEIGHTS)
                .mapToLong(BufferSpec::bytes).sum();
        long promptBytes = prompt.list().buffers().stream()
                .filter(b -> b.kind() != BufferSpec.Kind.WEIGHTS && b.kind() != BufferSpec.Kind.KV_CACHE)
                .mapToLong(BufferSpec::bytes).sum();
        return decodeBytes + promptBytes;
    }

    private void releaseBuffers() {
        for (MemorySegment b : owned) {
            rt.release(b);
        }
        owned.clear();
    }

    @Override
    public void close() {
        device.endResidency(residency);
        decode.encoder().close();
        prompt.encoder().close();
        releaseBuffers();
    }
}
