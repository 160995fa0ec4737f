package dev.glimmer.engine.backend.cuda;

import dev.glimmer.engine.backend.commandlist.DecodeModels;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.kernels.decode.BufferSpec;
import dev.glimmer.kernels.decode.CommandList;
import dev.glimmer.kernels.decode.DecodeCommandListBuilder;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.function.LongConsumer;

/**
 * A model's weights in device memory, copied once from the mapped file and shared by every
 * {@link CudaGraphRunner} (pool) of the model: the command list's weight buffers, which depend on
 * the file only, not on the context size.
 */
public final class CudaWeights implements AutoCloseable {

    /** Bytes per host-to-device copy: large enough for full speed, small enough for progress. */
    private static final long UPLOAD_CHUNK = 256L << 20;

    private final GlmModel model;
    private final CudaKernels kernels;
    private final List<BufferSpec> specs = new ArrayList<>();
    private final List<Long> pointers = new ArrayList<>();
    private final long bytes;

    /**
     * Copies the weights of {@code model}'s trunk to {@code kernels}' device.
     *
     * @param progress told the bytes copied so far after each chunk
     */
    public CudaWeights(GlmModel model, CudaKernels kernels, LongConsumer progress) {
        this(model, kernels, false, progress);
    }

    /**
     * As {@link #CudaWeights(GlmModel, CudaKernels, LongConsumer)}, the NextN block's too with {@code nextn} (for the
     * lists of a drafting pool).
     */
    public CudaWeights(GlmModel model, CudaKernels kernels, boolean nextn, LongConsumer progress) {
        this.model = model;
        this.kernels = kernels;
        CudaDriver driver = kernels.device().driver();
        kernels.device().makeCurrent();
        CommandList list = DecodeCommandListBuilder.build(DecodeModels.of(model.file(), model.config(), nextn), 1);
        MemorySegment file = model.file().mapping();
        long uploaded = 0;
        try {
            for (BufferSpec b : list.buffers()) {
                if (b.kind() != BufferSpec.Kind.WEIGHTS) {
                    continue;
                }
                long p = driver.alloc(b.bytes());
                specs.add(b);
                pointers.add(p);
                for (long at = 0; at < b.bytes(); at += UPLOAD_CHUNK) {
                    long n = Math.min(UPLOAD_CHUNK, b.bytes() - at);
                    driver.copyToDevice(p + at, file.asSlice(b.fileOffset() + at, n), n);
                    uploaded += n;
                    progress.accept(uploaded);
                }
            }
        } catch (RuntimeException e) {
            close();
            throw e;
        }
        this.bytes = uploaded;
    }

    public GlmModel model() {
        return model;
    }

    public CudaKernels kernels() {
        return kernels;
    }

    /** Bytes of weights on the device. */
    public long bytes() {
        return bytes;
    }

    /** The device address of the weight buffer {@code spec} (a buffer of a command list of this model). */
    long pointer(BufferSpec spec) {
        for (int i = 0; i < specs.size(); i++) {
            BufferSpec s = specs.get(i);
            if (s.fileOffset() == spec.fileOffset() && s.bytes() == spec.bytes()) {
                return pointers.get(i);
            }
        }
        throw new IllegalStateException("weight buffer " + spec + " was not uploaded");
    }

    @Override
    public void close() {
        kernels.device().makeCurrent();
        for (long p : pointers) {
            kernels.device().driver().free(p);
        }
        pointers.clear();
        specs.clear();
    }
}
