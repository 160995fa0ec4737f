package dev.glimmer.kernels.decode;

import dev.glimmer.kernels.Geometry;
import java.util.List;
import java.util.Locale;

/**
 * The device memory of a GPU backend's pool of sequences (docs/KERNELS.md §3a), per part: the weights (the file's
 * ranges the command lists bind), the KV pool ({@code slots} x {@code context} rows of every layer, halves) and the
 * command lists' own buffers (activations, arguments and step of the decode list, the prompt list and each batch
 * decode list). The one home of these figures: {@code plan} prints them, and a backend compares them with what its
 * device offers before it makes the pool.
 *
 * @param weights     bytes of the weight buffers
 * @param kvPool      bytes of the KV pool
 * @param activations bytes of the command lists' activations, arguments and step buffers
 * @param slots       sequences of the pool
 * @param context     positions of each sequence
 */
public record MemoryBudget(long weights, long kvPool, long activations, int slots, int context) {

    /**
     * Sequences of the pool a server decoding {@code parallel} at once makes when no KV budget is set: two more, so
     * that a follow-up turn can find its conversation's cache while others run.
     */
    public static int poolSlots(int parallel) {
        return parallel + 2;
    }

    /**
     * The pool a server makes for {@code parallel} conversations of {@code context} positions on a device that offers
     * {@code available} bytes (negative: unknown): {@link #poolSlots} sequences, fewer where they do not fit, but at
     * least {@code parallel} (whether those fit, {@link #fits} says). {@code weightsThere} as in {@link #fits}.
     */
    public static MemoryBudget forServing(
            DecodeModel model, int context, int parallel, long available, boolean weightsThere) {
        MemoryBudget b = of(model, context, poolSlots(parallel));
        if (available < 0 || b.fits(available, weightsThere)) {
            return b;
        }
        // the activations shrink with the slots (fewer batch lists), so what fits with these slots' also fits then
        return of(model, context, Math.max(parallel, Math.min(b.slots, b.slotsThatFit(available, weightsThere))));
    }

    /** The pool of {@code slots} sequences of {@code context} positions of {@code model}, as the GPU backends make it. */
    public static MemoryBudget of(DecodeModel model, int context, int slots) {
        if (context < 1 || slots < 1) {
            throw new IllegalArgumentException(
                    "a pool holds at least one sequence of one position, not " + slots + " x " + context);
        }
        long kvRows = (long) slots * context;
        List<CommandList> lists = DecodeCommandListBuilder.pool(model, kvRows, slots, Geometry.PROMPT_TOKENS);
        long weights = 0;
        for (BufferSpec b : lists.getFirst().buffers()) {
            if (b.kind() == BufferSpec.Kind.WEIGHTS) {
                weights += b.bytes();
            }
        }
        long kv = 0;
        long own = 0;
        for (BufferSpec b : lists.getFirst().buffers()) {
            if (b.kind() == BufferSpec.Kind.KV_CACHE) {
                kv += b.bytes();
            } else if (b.kind().pooled()) {
                own += b.bytes(); // one for every list, as the KV pool
            }
        }
        for (CommandList list : lists) {
            own += list.args().length;
            for (BufferSpec b : list.buffers()) {
                if (b.kind() == BufferSpec.Kind.ACTIVATIONS || b.kind() == BufferSpec.Kind.STEP) {
                    own += b.bytes();
                }
            }
        }
        return new MemoryBudget(weights, kv, own, slots, context);
    }

    /** Everything the pool needs on the device. */
    public long total() {
        return weights + kvPool + activations;
    }

    /** KV bytes of one cached token (every layer). */
    public long kvBytesPerToken() {
        return kvPool / ((long) slots * context);
    }

    /**
     * Whether the pool fits in {@code available} bytes of the device; {@code weightsThere} when the weights already
     * lie in that memory's used part (CUDA's free memory, measured after the upload), so they are not counted again.
     */
    public boolean fits(long available, boolean weightsThere) {
        return needed(weightsThere) <= available;
    }

    private long needed(boolean weightsThere) {
        return (weightsThere ? 0 : weights) + kvPool + activations;
    }

    /**
     * The most positions per sequence (with these slots) whose pool fits in {@code available} bytes, 0 when not even
     * one does (the activations do not depend on the context, only the KV pool does).
     */
    public int contextThatFits(long available, boolean weightsThere) {
        long room = available - (weightsThere ? 0 : weights) - activations;
        long perPosition = kvBytesPerToken() * slots;
        return (int) Math.max(0, Math.min(Integer.MAX_VALUE, room / perPosition));
    }

    /** The most sequences of this context whose pool fits, 0 when not even one does (counting these slots' activations). */
    public int slotsThatFit(long available, boolean weightsThere) {
        long room = available - (weightsThere ? 0 : weights) - activations;
        long perSlot = kvBytesPerToken() * context;
        return (int) Math.max(0, Math.min(Integer.MAX_VALUE, room / perSlot));
    }

    /**
     * One line saying what does not fit in the {@code available} bytes {@code device} offers and what to change:
     * {@code --ctx} or {@code --parallel} with the values that fit, or a smaller model file.
     */
    public String doesNotFit(String device, long available, boolean weightsThere) {
        StringBuilder s = new StringBuilder(String.format(
                Locale.ROOT,
                "%s offers %s, but %d conversation%s of %,d tokens need %s (%s)",
                device,
                gb(available),
                slots,
                slots == 1 ? "" : "s",
                context,
                gb(needed(weightsThere)),
                parts(weightsThere)));
        int ctx = contextThatFits(available, weightsThere);
        int fitting = slotsThatFit(available, weightsThere);
        if (fitting >= 1) {
            s.append(String.format(Locale.ROOT, ": lower --parallel to %d, or --ctx to %,d", fitting, ctx));
        } else if (ctx >= 1) {
            s.append(String.format(Locale.ROOT, ": lower --ctx to %,d", ctx));
        } else if (!weightsThere && weights > available) {
            s.append(": the weights alone do not fit; use a smaller quantization or --backend cpu");
        } else {
            s.append(": not even one position fits beside the weights; use a smaller quantization or --backend cpu");
        }
        return s.toString();
    }

    /** The parts, e.g. {@code weights 16.9 GB + KV 3.5 GB + activations 1.2 GB}. */
    public String parts(boolean weightsThere) {
        return (weightsThere ? "" : "weights " + gb(weights) + " + ") + "KV " + gb(kvPool) + " + activations "
                + gb(activations);
    }

    /** Bytes in GB (10^9), or in MB below a GB. */
    static String gb(long bytes) {
        return bytes >= 1e9
                ? String.format(Locale.ROOT, "%.2f GB", bytes / 1e9)
                : String.format(Locale.ROOT, "%.1f MB", bytes / 1e6);
    }
}
