package dev.glimmer.engine.kv;

import dev.glimmer.engine.InvalidInputException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The KV cache of one sequence, off-heap: for every layer and position one latent row of
 * {@code rowWidth} values (MLA: the normalized compressed KV followed by the rotated shared key,
 * 576 values in the real model). The value vectors are the first {@code kv_lora_rank} values of
 * each row, so there is no separate V cache. Layout: {@code [layer][position][rowWidth]}.
 *
 * <p>Positions {@code 0 .. size()-1} are filled. The forward pass writes the rows of the tokens it
 * processes ({@link #write}) and then {@link #advance}s the size; {@link #truncate} keeps a prefix
 * for reuse. Not thread-safe: one sequence is computed by one caller at a time.
 */
public final class KvCache implements AutoCloseable {
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT;
    private static final ValueLayout.OfShort F16 = ValueLayout.JAVA_SHORT;

    private final int layers;
    private final int rowWidth;
    private final int capacity;
    private final KvCacheType type;
    private final Arena arena;
    private final MemorySegment data;
    private int size;

    /**
     * @param layers   layers of the model
     * @param rowWidth values per position and layer
     * @param capacity positions it can hold (the context size)
     */
    public KvCache(int layers, int rowWidth, int capacity, KvCacheType type) {
        if (capacity <= 0) {
            throw new InvalidInputException("the context size must be positive, got " + capacity);
        }
        this.layers = layers;
        this.rowWidth = rowWidth;
        this.capacity = capacity;
        this.type = type;
        this.arena = Arena.ofShared();
        this.data = arena.allocate(bytes(layers, rowWidth, capacity, type), 64);
    }

    /** Bytes a cache of these dimensions holds off-heap (what {@link #bytes()} returns), without making one. */
    public static long bytes(int layers, int rowWidth, int capacity, KvCacheType type) {
        return (long) layers * capacity * rowWidth * type.bytes;
    }

    public int layers() {
        return layers;
    }

    public int rowWidth() {
        return rowWidth;
    }

    public int capacity() {
        return capacity;
    }

    public KvCacheType type() {
        return type;
    }

    /** Positions filled so far: the next token goes to position {@code size()}. */
    public int size() {
        return size;
    }

    /** Positions still free. */
    public int remaining() {
        return capacity - size;
    }

    /** Bytes held off-heap. */
    public long bytes() {
        return data.byteSize();
    }

    /** Keeps the first {@code n} positions (a shared prompt prefix) and forgets the rest. */
    public void truncate(int n) {
        if (n < 0 || n > size) {
            throw new IllegalArgumentException("cannot truncate a cache of " + size + " positions to " + n);
        }
        size = n;
    }

    /** Marks {@code n} more positions as filled, after their rows were written in every layer. */
    public void advance(int n) {
        if (n < 0 || size + n > capacity) {
            throw new IllegalStateException(
                    "cache of " + capacity + " positions cannot grow from " + size + " by " + n);
        }
        size += n;
    }

    /** Stores the row at {@code position} of {@code layer} from {@code src[off .. off+rowWidth)}. */
    public void write(int layer, int position, float[] src, int off) {
        long base = index(layer, position);
        if (type == KvCacheType.F32) {
            MemorySegment.copy(src, off, data, F32, base * 4, rowWidth);
        } else {
            for (int i = 0; i < rowWidth; i++) {
                data.setAtIndex(F16, base + i, Float.floatToFloat16(src[off + i]));
            }
        }
    }

    /** {@code Σ_i q[qOff+i] · row[i]} over the whole row of {@code layer} at {@code position}. */
    public float dot(int layer, int position, float[] q, int qOff) {
        long base = index(layer, position);
        float sum = 0f;
        if (type == KvCacheType.F32) {
            for (int i = 0; i < rowWidth; i++) {
                sum += q[qOff + i] * data.getAtIndex(F32, base + i);
            }
        } else {
            for (int i = 0; i < rowWidth; i++) {
                sum += q[qOff + i] * Float.float16ToFloat(data.getAtIndex(F16, base + i));
            }
        }
        return sum;
    }

    /** {@code acc[accOff+i] += weight · row[i]} for the first {@code n} values of the row (the value part). */
    public void accumulate(int layer, int position, float weight, float[] acc, int accOff, int n) {
        long base = index(layer, position);
        if (type == KvCacheType.F32) {
            for (int i = 0; i < n; i++) {
                acc[accOff + i] += weight * data.getAtIndex(F32, base + i);
            }
        } else {
            for (int i = 0; i < n; i++) {
                acc[accOff + i] += weight * Float.float16ToFloat(data.getAtIndex(F16, base + i));
            }
        }
    }

    /**
     * Values {@code from .. from+count-1} of the row of {@code layer} at {@code position}, as floats, into
     * {@code dst[dstOff ..]}; {@code halves} is scratch of at least {@code count} entries (F16 caches copy
     * the raw values there first, so that the conversion runs as one vectorizable loop).
     */
    public void read(int layer, int position, int from, int count, float[] dst, int dstOff, short[] halves) {
        long base = index(layer, position) + from;
        if (type == KvCacheType.F32) {
            MemorySegment.copy(data, F32, base * 4, dst, dstOff, count);
        } else {
            MemorySegment.copy(data, F16, base * 2, halves, 0, count);
            for (int i = 0; i < count; i++) {
                dst[dstOff + i] = Float.float16ToFloat(halves[i]);
            }
        }
    }

    /** Bytes of one position's rows in every layer: what {@link #exportRows} writes per position. */
    public long bytesPerPosition() {
        return (long) layers * rowWidth * type.bytes;
    }

    /**
     * Copies the rows of positions {@code 0 .. n-1} of every layer into {@code into}, layer after layer, as stored
     * (F16 or F32 values): {@code n × bytesPerPosition()} bytes that {@link #importRows} puts back.
     */
    public void exportRows(int n, MemorySegment into) {
        checkRows(n, into, size);
        long layerBytes = (long) n * rowWidth * type.bytes;
        for (int layer = 0; layer < layers; layer++) {
            MemorySegment.copy(data, index(layer, 0) * type.bytes, into, layer * layerBytes, layerBytes);
        }
    }

    /** Puts rows written by {@link #exportRows} (of a cache of the same shape and type) at positions 0 .. n-1; the size becomes {@code n}. */
    public void importRows(MemorySegment from, int n) {
        checkRows(n, from, capacity);
        long layerBytes = (long) n * rowWidth * type.bytes;
        for (int layer = 0; layer < layers; layer++) {
            MemorySegment.copy(from, layer * layerBytes, data, index(layer, 0) * type.bytes, layerBytes);
        }
        size = n;
    }

    private void checkRows(int n, MemorySegment rows, int most) {
        if (n < 0 || n > most) {
            throw new IllegalArgumentException(n + " positions, not within 0 .. " + most);
        }
        if (rows.byteSize() < n * bytesPerPosition()) {
            throw new IllegalArgumentException(
                    rows.byteSize() + " bytes hold fewer than " + n + " positions of " + bytesPerPosition() + " bytes");
        }
    }

    private long index(int layer, int position) {
        if (layer < 0 || layer >= layers || position < 0 || position >= capacity) {
            throw new IndexOutOfBoundsException("layer " + layer + ", position " + position + " outside a cache of "
                    + layers + " layers × " + capacity + " positions");
        }
        return ((long) layer * capacity + position) * rowWidth;
    }

    /** Frees the memory; the cache cannot be used afterwards. */
    @Override
    public void close() {
        arena.close();
    }
}
