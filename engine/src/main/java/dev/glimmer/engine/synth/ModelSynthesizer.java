package dev.glimmer.engine.synth;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.gguf.GgufWriter;
import dev.glimmer.engine.gguf.GgufWriter.TensorSpec;
import dev.glimmer.engine.tensor.GgmlType;
import dev.glimmer.engine.tensor.Q4_0;
import dev.glimmer.engine.tensor.Q8_0;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * Writes a synthetic model: random weights, streamed to disk through {@link GgufWriter}.
 *
 * <p>Each tensor is cut into chunks of whole rows (about a million values each, a number that
 * depends only on the row length). A chunk's values come from its own random stream, derived from
 * the seed, the tensor name and the chunk index, so chunks are generated on all cores and written
 * in order, and the same seed always gives the same bytes. Quantized weights are produced the way a
 * real model's are, float values through the reference Q8_0/Q4_0 quantizers, except in presets with
 * {@link SynthPreset#randomBlocks()} (full), whose blocks are drawn directly with a similar spread, and
 * for the other types of a mix such as Q4_K_M (K-quants, Q5_0, Q5_1), drawn so in every preset.
 * At most two chunks per core are in memory at once, whatever the size of the file.
 */
public final class ModelSynthesizer {

    /** Called after each chunk with the bytes written so far and the file's final size. */
    public interface Progress {
        void update(long written, long total);
    }

    private static final int CHUNK_VALUES = 1 << 20;
    /** Free space demanded beyond the file's size: 256 MB plus 2 % of the file. */
    private static final long MARGIN_BYTES = 256L << 20;

    private ModelSynthesizer() {}

    /** The size the file of {@code model} will have. */
    public static long fileSize(SynthModel model) {
        return GgufWriter.fileSize(model.metadata(), model.tensors());
    }

    /**
     * Writes {@code model} with weights drawn from its seed to {@code out} (through a temporary name,
     * renamed at the end).
     *
     * @throws InvalidInputException when the output directory is missing or lacks the free space
     */
    public static void write(SynthModel model, Path out, Progress progress) throws IOException {
        long size = fileSize(model);
        checkOutput(out, size);
        int threads = Math.max(1, Runtime.getRuntime().availableProcessors());
        ExecutorService pool = Executors.newFixedThreadPool(threads, r -> {
            Thread t = new Thread(r, "synth-worker");
            t.setDaemon(true);
            return t;
        });
        try (GgufWriter writer = GgufWriter.create(out, model.metadata(), model.tensors())) {
            Iterator<Chunk> chunks =
                    chunks(model.tensors(), model.preset().randomBlocks()).iterator();
            Deque<Future<ByteBuffer>> inFlight = new ArrayDeque<>();
            while (chunks.hasNext() || !inFlight.isEmpty()) {
                while (chunks.hasNext() && inFlight.size() < 2 * threads) {
                    Chunk c = chunks.next();
                    inFlight.add(pool.submit(() -> c.generate(model.seed())));
                }
                writer.write(result(inFlight.removeFirst()));
                progress.update(writer.bytesWritten(), writer.totalBytes());
            }
        } finally {
            pool.shutdownNow();
        }
    }

    private static ByteBuffer result(Future<ByteBuffer> future) throws IOException {
        try {
            return future.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while generating weights", e);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof RuntimeException r) {
                throw r;
            }
            throw new IllegalStateException(e.getCause());
        }
    }

    private static void checkOutput(Path out, long size) throws IOException {
        Path dir = out.toAbsolutePath().getParent();
        if (dir == null || !Files.isDirectory(dir)) {
            throw new InvalidInputException("cannot write " + out + ": no such directory " + dir);
        }
        if (Files.isDirectory(out)) {
            throw new InvalidInputException("cannot write " + out + ": it is a directory");
        }
        if (!Files.isWritable(dir)) {
            throw new InvalidInputException("cannot write " + out + ": directory " + dir + " is not writable");
        }
        requireFreeSpace(dir, size, Files.getFileStore(dir).getUsableSpace());
    }

    /** Refuses a file of {@code size} bytes in {@code dir} when {@code free} bytes do not hold it and a margin. */
    static void requireFreeSpace(Path dir, long size, long free) {
        long needed = size + MARGIN_BYTES + size / 50;
        if (free < needed) {
            throw new InvalidInputException(String.format(
                    Locale.ROOT,
                    "not enough free space in %s: the file needs %.2f GB plus %.2f GB of margin, %.2f GB are free",
                    dir,
                    size / 1e9,
                    (needed - size) / 1e9,
                    free / 1e9));
        }
    }

    /** Every chunk of every tensor, in file order. */
    private static List<Chunk> chunks(List<TensorSpec> tensors, boolean randomBlocks) {
        List<Chunk> chunks = new ArrayList<>();
        for (TensorSpec t : tensors) {
            long rowLength = t.shape()[0];
            long rows = t.size() == 0 ? 0 : t.size() / t.type().rowBytes(rowLength);
            long rowsPerChunk = Math.max(1, CHUNK_VALUES / rowLength);
            long index = 0;
            for (long row = 0; row < rows; row += rowsPerChunk, index++) {
                chunks.add(new Chunk(
                        t,
                        index,
                        (int) rowLength,
                        (int) Math.min(rowsPerChunk, rows - row),
                        t.type().quantized() && (randomBlocks || !hasQuantizer(t.type()))));
            }
        }
        return chunks;
    }

    /** Whether {@link #encode} quantizes floats to {@code type}: the other types of a mix are drawn as random blocks. */
    private static boolean hasQuantizer(GgmlType type) {
        return type == GgmlType.Q4_0 || type == GgmlType.Q8_0;
    }

    /** Rows {@code index * rowsPerChunk ...} of one tensor. */
    private record Chunk(TensorSpec tensor, long index, int rowLength, int rows, boolean randomBlocks) {

        ByteBuffer generate(long seed) {
            SynthRandom random = SynthRandom.forStream(seed, tensor.name(), index);
            if (randomBlocks) {
                return randomQuantBlocks(tensor.type(), rowLength * rows, random);
            }
            float mean = SynthModel.mean(tensor.name());
            int n = rowLength * rows;
            float[] values = new float[n];
            for (int i = 0; i < n; i++) {
                values[i] = mean + SynthModel.STDDEV * random.nextNormal();
            }
            return encode(tensor.type(), values);
        }
    }

    /**
     * {@code n} values of Q8_0, Q4_0, Q5_0, Q5_1 or a K-quant as random blocks: quants (and the K-quants'
     * 6- or 8-bit sub-block scales and minimums) uniform over their range, and block scales (varying ±20 %
     * from block to block) such that the values have about the standard deviation of the float weights,
     * 0.02, around 0. Uniform quants have a standard deviation of 0.58 of their half-range, so a block's
     * largest value is 1.73 standard deviations; a K-quant's standard deviation is its scale times the
     * one of (sub-block scale × quant - minimum) worked out below for uniform 6-bit scales and minimums.
     */
    static ByteBuffer randomQuantBlocks(GgmlType type, int n, SynthRandom random) {
        int blocks = n / type.blockSize;
        ByteBuffer b = ByteBuffer.allocate(blocks * type.bytesPerBlock).order(ByteOrder.LITTLE_ENDIAN);
        float largest = 1.73f * SynthModel.STDDEV;
        for (int i = 0; i < blocks; i++) {
            float spread = largest * (0.8f + 0.4f * (random.nextInt(1 << 16) / 65536f));
            switch (type) {
                case Q4_0 -> {
                    // ggml's scale is the largest-magnitude value over -8: either sign.
                    float d = (random.nextInt(2) == 0 ? spread : -spread) / 8f;
                    b.putShort(Float.floatToFloat16(d));
                    b.putLong(random.nextLong()).putLong(random.nextLong());
                }
                case Q8_0 -> {
                    b.putShort(Float.floatToFloat16(spread / 127f));
                    for (int j = 0; j < 4; j++) {
                        long r = random.nextLong();
                        for (int k = 0; k < 8; k++) {
                            byte q = (byte) (r >>> (8 * k));
                            b.put(q == Byte.MIN_VALUE ? -127 : q); // quants stay within ±127
                        }
                    }
                }
                case Q5_0 -> {
                    b.putShort(Float.floatToFloat16(spread / 16f));
                    b.putInt((int) random.nextLong());
                    b.putLong(random.nextLong()).putLong(random.nextLong());
                }
                case Q5_1 -> {
                    // Values d·q + m for q in 0..31: m = -15.5·d centres them.
                    float d = spread / 16f;
                    b.putShort(Float.floatToFloat16(d)).putShort(Float.floatToFloat16(-15.5f * d));
                    b.putInt((int) random.nextLong());
                    b.putLong(random.nextLong()).putLong(random.nextLong());
                }
                case Q4_K, Q5_K -> {
                    // Values d·sc·q - dmin·m (sc, m in 0..63; q in 0..15 or 0..31): dmin = 7.5·d (15.5·d)
                    // centres them, and their standard deviation is then about 244·d (524·d).
                    boolean five = type == GgmlType.Q5_K;
                    float d = spread / 1.73f / (five ? 524f : 244f);
                    b.putShort(Float.floatToFloat16(d)).putShort(Float.floatToFloat16((five ? 15.5f : 7.5f) * d));
                    randomBytes(b, 12 + (five ? 32 : 0) + 128, random);
                }
                case Q6_K -> {
                    // Values d·sc·(q - 32), q in 0..63, sc a signed byte: standard deviation about 1350·d.
                    randomBytes(b, 128 + 64 + 16, random);
                    b.putShort(Float.floatToFloat16(spread / 1.73f / 1350f));
                }
                default -> throw new IllegalArgumentException("no random blocks for " + type.ggmlName());
            }
        }
        return b.flip();
    }

    private static void randomBytes(ByteBuffer b, int count, SynthRandom random) {
        for (int i = 0; i < count; i += 8) {
            long r = random.nextLong();
            for (int k = 0; k < 8 && i + k < count; k++) {
                b.put((byte) (r >>> (8 * k)));
            }
        }
    }

    /** The values in {@code type}'s encoding, little-endian. */
    static ByteBuffer encode(GgmlType type, float[] values) {
        int n = values.length;
        return switch (type) {
            case F32 -> {
                ByteBuffer b = ByteBuffer.allocate(n * 4).order(ByteOrder.LITTLE_ENDIAN);
                b.asFloatBuffer().put(values);
                yield b;
            }
            case F16 -> {
                ByteBuffer b = ByteBuffer.allocate(n * 2).order(ByteOrder.LITTLE_ENDIAN);
                for (float v : values) {
                    b.putShort(Float.floatToFloat16(v));
                }
                yield b.flip();
            }
            case Q8_0 -> {
                byte[] out = new byte[n / Q8_0.BLOCK_SIZE * Q8_0.BLOCK_BYTES];
                Q8_0.quantizeRow(values, 0, n, MemorySegment.ofArray(out), 0);
                yield ByteBuffer.wrap(out);
            }
            case Q4_0 -> {
                byte[] out = new byte[n / Q4_0.BLOCK_SIZE * Q4_0.BLOCK_BYTES];
                Q4_0.quantizeRow(values, 0, n, MemorySegment.ofArray(out), 0);
                yield ByteBuffer.wrap(out);
            }
            default ->
                throw new IllegalArgumentException(
                        "synthetic weights of type " + type.ggmlName() + " are not supported");
        };
    }
}
