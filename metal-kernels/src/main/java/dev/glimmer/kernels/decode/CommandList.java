package dev.glimmer.kernels.decode;

import dev.glimmer.kernels.ArgStruct;
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

    /** One token of a run: its id, its position, and the KV buffer row of its sequence's position 0. */
    public record StepRow(int token, int pos, int kvRow) {}

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

    /**
     * The content of the STEP buffer for a run of {@code count} consecutive tokens of one sequence,
     * {@code ids[from ..]}, from position {@code at}, its KV rows from {@code kvRow}: see {@link #steps(ArgStruct, List)}.
     */
    public byte[] steps(ArgStruct stepArgs, int[] ids, int from, int count, int at, int kvRow) {
        return steps(stepArgs, consecutive(ids, from, count, at, kvRow));
    }

    /** The rows of {@code count} consecutive tokens of one sequence, {@code ids[from ..]}, from position {@code at}. */
    public static List<StepRow> consecutive(int[] ids, int from, int count, int at, int kvRow) {
        List<StepRow> rows = new ArrayList<>(count);
        for (int t = 0; t < count; t++) {
            rows.add(new StepRow(ids[from + t], at + t, kvRow));
        }
        return rows;
    }

    /**
     * The content of the STEP buffer for a run of {@code rows}: a {@code StepArgs} each ({@code stepArgs}, the
     * library's struct), then empty ones (kv_len 0: no token there) up to {@link #tokens}.
     */
    public byte[] steps(ArgStruct stepArgs, List<StepRow> rows) {
        if (rows.isEmpty() || rows.size() > tokens) {
            throw new IllegalArgumentException("a run of this list takes 1.." + tokens + " tokens, not " + rows.size());
        }
        byte[] all = new byte[tokens * stepArgs.size()];
        for (int t = 0; t < rows.size(); t++) {
            StepRow r = rows.get(t);
            byte[] b = stepArgs.pack(
                    Map.of("token", r.token(), "pos", r.pos(), "kv_len", r.pos() + 1, "kv_row", r.kvRow()));
            System.arraycopy(b, 0, all, t * stepArgs.size(), b.length);
        }
        byte[] none = stepArgs.pack(Map.of("token", 0, "pos", 0, "kv_len", 0, "kv_row", 0));
        for (int t = rows.size(); t < tokens; t++) {
            System.arraycopy(none, 0, all, t * stepArgs.size(), none.length);
        }
        return all;
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
