package dev.glimmer.kernels.decode;

import dev.glimmer.kernels.ArgStruct;
import dev.glimmer.kernels.Geometry;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Everything one decode step runs: its buffers, the bytes of the argument buffer, and the
 * dispatches in order. It is encoded once (a Metal indirect command buffer, or the emulator's
 * replay); per token only the {@link BufferSpec.Kind#STEP} buffer changes.
 *
 * @param buffers     every buffer the dispatches bind
 * @param args        the content of the {@link BufferSpec.Kind#ARGS} buffer
 * @param dispatches  in execution order
 * @param logits      where the output logits (vocab floats per output row) lie in the activations buffer
 * @param token       where argmax writes the greedy tokens (one uint per output row) in the activations buffer
 * @param tokens      the most tokens one run takes (1 for the decode step; the prompt or batch list's
 *                    batch): the STEP buffer holds that many {@code StepArgs}
 * @param outputs     rows with logits and a greedy token: 1 (the decode step, or a prompt batch's last token)
 *                    or {@code tokens} (the batch decode list: row i's at i)
 */
public record CommandList(
        List<BufferSpec> buffers,
        byte[] args,
        List<Dispatch> dispatches,
        long logits,
        long token,
        int tokens,
        int outputs) {

    /**
     * One token of a run: its id (or {@link Geometry#PREVIOUS_GREEDY}), its position, the KV buffer row of its
     * sequence's position 0, and its sequence's slot of the pool (where the sequence's latest greedy token is kept).
     */
    public record StepRow(int token, int pos, int kvRow, int slot) {}

    public CommandList {
        buffers = List.copyOf(buffers);
        dispatches = List.copyOf(dispatches);
    }

    /** The index of the single buffer of {@code kind} (ARGS, STEP, ACTIVATIONS). */
    public int buffer(BufferSpec.Kind kind) {
        int found = -1;
        for (int i = 0; i < buffers.size(); i++) {
            if (buffers.get(i).kind() == kind) {
                if (found >= 0) {
                    throw new IllegalArgumentException("more than one " + kind + " buffer");
                }
                found = i;
            }
        }
        if (found < 0) {
            throw new IllegalArgumentException("no " + kind + " buffer");
        }
        return found;
    }

    /** The rows of {@code count} consecutive tokens of one sequence, {@code ids[from ..]}, from position {@code at}. */
    public static List<StepRow> consecutive(int[] ids, int from, int count, int at, int kvRow, int slot) {
        List<StepRow> rows = new ArrayList<>(count);
        for (int t = 0; t < count; t++) {
            rows.add(new StepRow(ids[from + t], at + t, kvRow, slot));
        }
        return rows;
    }

    /**
     * The content of the STEP buffer for a run of {@code rows}: a {@code StepArgs} each ({@code stepArgs}, the
     * library's struct), then empty ones (all zero, kv_len 0: no token there) up to {@link #tokens}. A row's token may
     * be {@link Geometry#PREVIOUS_GREEDY}: its sequence's greedy token, which its previous run left on the device.
     */
    public byte[] steps(ArgStruct stepArgs, List<StepRow> rows) {
        if (rows.isEmpty() || rows.size() > tokens) {
            throw new IllegalArgumentException("a run of this list takes 1.." + tokens + " tokens, not " + rows.size());
        }
        ByteBuffer all = ByteBuffer.allocate(tokens * stepArgs.size()).order(ByteOrder.LITTLE_ENDIAN);
        int token = stepArgs.offset("token");
        int pos = stepArgs.offset("pos");
        int kvLen = stepArgs.offset("kv_len");
        int kvRow = stepArgs.offset("kv_row");
        int slot = stepArgs.offset("slot");
        for (int t = 0; t < rows.size(); t++) {
            StepRow r = rows.get(t);
            int at = t * stepArgs.size();
            all.putInt(at + token, r.token());
            all.putInt(at + pos, r.pos());
            all.putInt(at + kvLen, r.pos() + 1);
            all.putInt(at + kvRow, r.kvRow());
            all.putInt(at + slot, r.slot());
        }
        return all.array();
    }

    /** Weight bytes one step reads: each tensor counted once, with the largest share any dispatch reads. */
    public long weightBytesPerStep() {
        Map<String, Long> reads = new HashMap<>();
        for (Dispatch d : dispatches) {
            for (Dispatch.WeightRead r : d.weightReads()) {
                reads.merge(r.tensor(), r.bytes(), Math::max);
            }
        }
        return reads.values().stream().mapToLong(Long::longValue).sum();
    }
}
