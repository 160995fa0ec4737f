package dev.glimmer.engine.backend.commandlist;

import dev.glimmer.engine.InvalidInputException;
import dev.glimmer.engine.backend.KernelTimings;
import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.SequenceSlots;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.kernels.ArgStruct;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.KernelLibrary;
import dev.glimmer.kernels.decode.BufferSpec;
import dev.glimmer.kernels.decode.CommandList;
import dev.glimmer.kernels.decode.DecodeCommandListBuilder;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.stream.IntStream;

/**
 * The {@link SequencePool} of every device that runs the GPU command lists (CUDA, Metal, the kernel emulator), written
 * once: the decode list, the prompt list and the batch decode lists ({@link Geometry#batchSizes}) of one model, bound
 * once by the device's {@link ListRunner} over one KV pool in which slot i owns rows {@code i × capacity ..} of every
 * layer's KV buffer ({@link SequenceSlots}). A run writes the list's {@code StepArgs} (token, position, KV length, the
 * sequence's first KV row; one per row), runs the list and reads back only what the rows ask for: the argmax's greedy
 * tokens, and logits where a row wants them. One token of one sequence runs the decode list, a prompt the prompt list
 * a batch at a time, a decode step of several sequences the smallest batch list that holds them (one pass over the
 * weights for all of them; more rows than the largest list: in turns of it).
 *
 * <p>A pool made with drafts (a model with the NextN block) also runs the draft list: every list then computes the
 * block's rows of its positions as well (one more KV buffer), and a {@link #speculate} step is the draft list on the
 * token (the block's greedy token is the draft), then a batch list of the token and the draft as two rows of the
 * sequence (docs/SPECULATIVE.md).
 *
 * <p>The KV buffers' sizes, and so a row's bytes and element type, are the builder's ({@link BufferSpec.Kind#KV_CACHE});
 * the pool only hands out row ranges. Not thread-safe: one caller at a time.
 */
public final class CommandListPool implements SequencePool, LayerProbe {

    /** A command list and its binding on the device. */
    private record Encoded(CommandList list, ListRunner.Bound bound) {
        int activations() {
            return list.buffer(BufferSpec.Kind.ACTIVATIONS);
        }
    }

    private final ListRunner runner;
    private final ArgStruct stepArgs = KernelLibrary.load().struct("StepArgs");
    private final Encoded decode;
    private final Encoded prompt;
    /** Batch decode lists of 2, 4, 8, ... rows, up to the slots (none for a pool of one that does not draft). */
    private final List<Encoded> batches;
    /** The NextN block on one token, its greedy token the draft; null when the pool does not draft. */
    private final Encoded draft;
    /** Tokens a speculative step drafts at most: 0, or up to {@link Geometry#MAX_DRAFTS}. */
    private final int maxDrafts;

    private final SequenceSlots slots;
    private final int vocab;
    /** Rows of the token embedding table: the token ids a run may hold. */
    private final int embeddingRows;
    /**
     * Host memory the reads land in: every output row's logits, then {@link #AREAS} areas of their greedy tokens, so
     * that one step's tokens are read while the next step's reads are queued ({@link #decode}).
     */
    private final MemorySegment readBack;

    private static final int AREAS = 2;
    /** Where the greedy token areas start in the read-back, and each one's bytes. */
    private final long tokensAt;

    private final long areaBytes;
    /** Per token area: the point after its step's reads, waited for before they are read. */
    private final ListRunner.Fence[] fences = new ListRunner.Fence[AREAS];
    /** Each slot's logits as handed out, reused from run to run. */
    private final float[][] logits;
    /** The decode list's KV buffers (one per layer, or more), in list order: a slot's rows are a range of each. */
    private final int[] kvBuffers;
    /** Host memory KV rows go through on their way to and from the device ({@link #exportPrefix}); made when first needed. */
    private MemorySegment staging;

    private static final long STAGING_BYTES = 4L << 20;

    /**
     * {@code slots} sequences of {@code capacity} positions of {@code model} on {@code runner} (closed with this pool,
     * also when this fails), prompts in batches of {@code promptTokens}.
     *
     * @throws InvalidInputException when the model's shape is one the GPU command lists do not handle
     */
    public CommandListPool(GlmModel model, ListRunner runner, int slots, int capacity, int promptTokens) {
        this(model, runner, slots, capacity, promptTokens, 0);
    }

    /**
     * As {@link #CommandListPool(GlmModel, ListRunner, int, int, int)}, drafting up to {@code maxDrafts} tokens a
     * speculative step (at most {@link Geometry#MAX_DRAFTS}; more than 0 needs a model with the NextN block).
     */
    public CommandListPool(
            GlmModel model, ListRunner runner, int slots, int capacity, int promptTokens, int maxDrafts) {
        if (maxDrafts < 0
                || maxDrafts > Geometry.MAX_DRAFTS
                || maxDrafts > 0 && model.weights().nextn() == null) {
            runner.close();
            throw new IllegalArgumentException(maxDrafts + " drafts: the GPU command lists draft 0 to "
                    + Geometry.MAX_DRAFTS + " tokens, with a model that has a NextN block");
        }
        this.maxDrafts = maxDrafts;
        this.runner = runner;
        this.slots = new SequenceSlots(slots, capacity, freed -> {});
        this.vocab = model.vocabSize();
        this.embeddingRows = model.weights().tokenEmbedding().rows();
        this.logits = new float[slots][];
        List<Encoded> made = new ArrayList<>();
        try {
            List<CommandList> lists = lists(model, slots, capacity, promptTokens, maxDrafts > 0);
            for (CommandList list : lists) {
                made.add(new Encoded(list, runner.bind(list)));
            }
            int outputs = made.stream().mapToInt(e -> e.list().outputs()).max().orElseThrow();
            tokensAt = 4L * vocab * outputs;
            areaBytes = 4L * outputs;
            readBack = runner.hostBuffer(
                    Math.max(tokensAt + AREAS * areaBytes, 4L * model.config().embedding()));
            for (int a = 0; a < AREAS; a++) {
                fences[a] = runner.fence();
            }
        } catch (RuntimeException | OutOfMemoryError e) {
            runner.close();
            throw e;
        }
        this.decode = made.get(0);
        this.prompt = made.get(1);
        this.draft = maxDrafts > 0 ? made.getLast() : null;
        this.batches = List.copyOf(made.subList(2, made.size() - (maxDrafts > 0 ? 1 : 0)));
        List<BufferSpec> buffers = decode.list().buffers();
        this.kvBuffers = IntStream.range(0, buffers.size())
                .filter(i -> buffers.get(i).kind() == BufferSpec.Kind.KV_CACHE)
                .toArray();
    }

    /** The decode list, the prompt list, then the batch lists, and the draft list last where the pool drafts. */
    private static List<CommandList> lists(
            GlmModel model, int slots, int capacity, int promptTokens, boolean drafting) {
        try {
            return DecodeCommandListBuilder.pool(
                    DecodeModels.of(model.file(), model.config(), drafting),
                    (long) slots * capacity,
                    slots,
                    promptTokens);
        } catch (IllegalArgumentException e) {
            throw new InvalidInputException(model.file().path().getFileName() + ": " + e.getMessage());
        }
    }

    /**
     * The KV bytes of one sequence of {@code capacity} positions, without making a pool: its rows of every layer, the
     * NextN block's too with {@code nextn} (a drafting pool).
     */
    public static long bytesPerSequence(GlmModel model, int capacity) {
        return bytesPerSequence(model, capacity, false);
    }

    /** As {@link #bytesPerSequence(GlmModel, int)}, with the NextN block's rows too with {@code nextn}. */
    public static long bytesPerSequence(GlmModel model, int capacity, boolean nextn) {
        return kvBytes(DecodeCommandListBuilder.build(DecodeModels.of(model.file(), model.config(), nextn), capacity));
    }

    /**
     * The tokens a GPU pool of {@code model} drafts a step when {@code asked} are: none without a NextN block, else
     * at most {@link Geometry#MAX_DRAFTS}.
     */
    public static int drafts(GlmModel model, int asked) {
        return model.weights().nextn() == null ? 0 : Math.min(Math.max(asked, 0), Geometry.MAX_DRAFTS);
    }

    private static long kvBytes(CommandList list) {
        return list.buffers().stream()
                .filter(b -> b.kind() == BufferSpec.Kind.KV_CACHE)
                .mapToLong(BufferSpec::bytes)
                .sum();
    }

    @Override
    public Sequence open() {
        return slots.open();
    }

    @Override
    public int slots() {
        return slots.size();
    }

    @Override
    public int capacity() {
        return slots.capacity();
    }

    /** One slot's KV rows of every layer: what one more cached conversation costs. */
    @Override
    public long bytesPerSequence() {
        return kvBytes(decode.list()) / slots.size();
    }

    @Override
    public int inUse() {
        return slots.inUse();
    }

    /** The KV pool, counted once, and every list's working buffers (the weights are the model's). */
    @Override
    public long bytes() {
        long total = decode.list().buffers().stream()
                .filter(b -> b.kind().pooled())
                .mapToLong(BufferSpec::bytes)
                .sum();
        for (Encoded r : all()) {
            total += r.list().buffers().stream()
                    .filter(b ->
                            b.kind() != BufferSpec.Kind.WEIGHTS && !b.kind().pooled())
                    .mapToLong(BufferSpec::bytes)
                    .sum();
        }
        return total;
    }

    private List<Encoded> all() {
        List<Encoded> all = new ArrayList<>(List.of(decode, prompt));
        all.addAll(batches);
        if (draft != null) {
            all.add(draft);
        }
        return all;
    }

    /** Bytes of one KV row of buffer {@code buffer} (its bytes over the pool's rows: the builder's row size and type). */
    private long rowBytes(int buffer) {
        return decode.list().buffers().get(buffer).bytes() / ((long) slots.size() * slots.capacity());
    }

    @Override
    public long bytesPerPosition() {
        long total = 0;
        for (int b : kvBuffers) {
            total += rowBytes(b);
        }
        return total;
    }

    /** The command lists' KV buffers: their count and row bytes (the builder's choice of element type). */
    @Override
    public String kvLayout() {
        StringBuilder layout = new StringBuilder("commandlist");
        for (int b : kvBuffers) {
            layout.append('-').append(rowBytes(b));
        }
        return layout.toString();
    }

    /** Buffer after buffer, the slot's range of rows, through the staging memory. */
    @Override
    public void exportPrefix(Sequence sequence, int n, MemorySegment into) {
        SequenceSlots.Slot slot = slots.own(sequence);
        if (n < 0 || n > slot.position()) {
            throw new IllegalArgumentException("the sequence holds " + slot.position() + " positions, not " + n);
        }
        moveRows(slot, n, into, true);
    }

    @Override
    public void importPrefix(Sequence sequence, MemorySegment from, int n) {
        SequenceSlots.Slot slot = slots.own(sequence);
        if (n < 0 || n > slots.capacity()) {
            throw new IllegalArgumentException(n + " positions, not within 0 .. " + slots.capacity());
        }
        slot.truncate(0);
        moveRows(slot, n, from, false);
        slot.advance(n);
    }

    /** Copies {@code slot}'s first {@code n} rows of every KV buffer to ({@code out}) or from {@code host}. */
    private void moveRows(SequenceSlots.Slot slot, int n, MemorySegment host, boolean out) {
        if (host.byteSize() < n * bytesPerPosition()) {
            throw new IllegalArgumentException(
                    host.byteSize() + " bytes hold fewer than " + n + " positions of " + bytesPerPosition() + " bytes");
        }
        if (staging == null) {
            staging = runner.hostBuffer(STAGING_BYTES);
        }
        long at = 0;
        for (int b : kvBuffers) {
            long rowBytes = rowBytes(b);
            long first = kvRow(slot) * rowBytes;
            long length = n * rowBytes;
            for (long done = 0; done < length; ) {
                long chunk = Math.min(STAGING_BYTES, length - done);
                MemorySegment stage = staging.asSlice(0, chunk);
                if (out) {
                    decode.bound().read(b, first + done, stage);
                    runner.finish();
                    MemorySegment.copy(stage, 0, host, at + done, chunk);
                } else {
                    MemorySegment.copy(host, at + done, stage, 0, chunk);
                    decode.bound().write(b, first + done, stage);
                    runner.finish();
                }
                done += chunk;
            }
            at += length;
        }
    }

    /** The decode step's command list. */
    @Override
    public CommandList commandList() {
        return decode.list();
    }

    /** One token runs the decode list; more the prompt list, a batch at a time. */
    @Override
    public Next prompt(Sequence sequence, int[] tokens, int from, int count, Readout readout) {
        SequenceSlots.Slot slot = slots.own(sequence);
        SequenceSlots.checkRun(slot, tokens, from, count, embeddingRows);
        if (count == 1) {
            return launchRows(List.of(slot), new int[] {tokens[from]}, new Readout[] {readout})
                    .results()[0];
        }
        int batch = prompt.list().tokens();
        for (int done = 0; done < count; ) {
            int n = Math.min(batch, count - done);
            writeAndRun(
                    prompt,
                    CommandList.consecutive(tokens, from + done, n, slot.position(), kvRow(slot), slot.index()));
            done += n;
            if (done == count) {
                queueReads(prompt, 1, new Readout[] {readout}, 0);
            }
            runner.finish();
            slot.advance(n);
        }
        return results(prompt, List.of(slot), new Readout[] {readout})[0];
    }

    /** Every position's logits, each token through the decode list (the prompt list computes the last one's only). */
    @Override
    public float[] promptLogits(Sequence sequence, int[] tokens, int from, int count) {
        SequenceSlots.checkRun(slots.own(sequence), tokens, from, count, embeddingRows);
        float[] out = new float[count * vocab];
        for (int i = 0; i < count; i++) {
            float[] row = prompt(sequence, tokens, from + i, 1, Readout.LOGITS).logits();
            System.arraycopy(row, 0, out, i * vocab, vocab);
        }
        return out;
    }

    @Override
    public Launched launch(List<Sequence> sequences, int[] tokens, Readout[] readouts) {
        List<SequenceSlots.Slot> own = slots.own(sequences);
        for (int i = 0; i < own.size(); i++) {
            SequenceSlots.checkRun(own.get(i), tokens, i, 1, embeddingRows);
        }
        int max = maxRows();
        if (own.size() <= max) {
            return launchRows(own, tokens, readouts);
        }
        Next[] out = new Next[own.size()];
        for (int first = 0; first < out.length; first += max) {
            int rows = Math.min(max, out.length - first);
            Next[] turn = launchRows(
                            own.subList(first, first + rows),
                            Arrays.copyOfRange(tokens, first, first + rows),
                            Arrays.copyOfRange(readouts, first, first + rows))
                    .results();
            System.arraycopy(turn, 0, out, first, rows);
        }
        return () -> out;
    }

    /**
     * Chains the steps where it can: while one step of the rows runs, the next one is queued with each row's token
     * being the greedy token the running step leaves on the device ({@link Geometry#PREVIOUS_GREEDY}), and the host
     * reads the running step's tokens meanwhile, one step behind; so the device goes from step to step without waiting
     * for the host. A step is chained when every row is greedy and has room for it. A row whose pick turns out not to be
     * the greedy token it was chained on (it stops, or bans that token) has its chained step discarded: its position is
     * not advanced, so the step after, fed the pick, writes the same KV row again. More rows than one list holds run as
     * {@link #step}s.
     */
    @Override
    public void decode(List<Sequence> sequences, int[] tokens, Readout[] readouts, Picker picker) {
        if (tokens.length != sequences.size() || readouts.length != sequences.size()) {
            throw new IllegalArgumentException(
                    sequences.size() + " sequences, " + tokens.length + " tokens and " + readouts.length + " readouts");
        }
        if (sequences.size() > maxRows()) {
            SequencePool.super.decode(sequences, tokens, readouts, picker);
            return;
        }
        new ChainedDecode(slots.own(sequences), tokens, readouts, picker).run();
    }

    /** One {@link #decode}: its rows, their readouts and picks, and the steps it has queued. */
    private final class ChainedDecode {
        private final List<SequenceSlots.Slot> own;
        private final Readout[] readouts;
        private final Picker picker;
        /** Each row's next token, once picked. */
        private final int[] feed;

        private final boolean[] stopped;
        /** Steps queued so far: they take the token areas in turn. */
        private int runs;
        /** The step whose logits the lists' activations hold: the last one run. */
        private Queued latest;

        /**
         * A queued step: its rows (indices into {@link #own}), each one's token (a chained row's is the greedy token of
         * the step before once that is known) and position, and whether it still counts (a chained row whose pick was
         * another token does not: its sequence does not take it).
         */
        private record Queued(Encoded list, int run, int[] rows, int[] inputs, int[] positions, boolean[] counts) {
            int area() {
                return run % AREAS;
            }

            boolean allCount() {
                for (boolean c : counts) {
                    if (!c) {
                        return false;
                    }
                }
                return true;
            }
        }

        ChainedDecode(List<SequenceSlots.Slot> own, int[] tokens, Readout[] readouts, Picker picker) {
            this.own = own;
            this.readouts = readouts.clone();
            this.picker = picker;
            this.feed = Arrays.copyOf(tokens, own.size());
            this.stopped = new boolean[own.size()];
        }

        void run() {
            Queued current = queueActive();
            while (current != null) {
                Queued next = chainable(current) ? queue(current.rows(), true) : null;
                collect(current, next);
                // A chained step whose rows did not all take the token it ran on is discarded whole (it wrote KV rows
                // past its rows' positions only): the rows still going run again fed their picks, through the list a
                // step of just them runs, as steps one after the other would.
                current = next != null && next.allCount() ? next : queueActive();
            }
        }

        /** Every row of {@code q} is greedy and has room for a step after it. */
        private boolean chainable(Queued q) {
            for (int r : q.rows()) {
                if (!readouts[r].greedy()
                        || own.get(r).position() + 2 > own.get(r).capacity()) {
                    return false;
                }
            }
            return true;
        }

        /** A step of every row that has not stopped, fed its pick; null when none is left. */
        private Queued queueActive() {
            int[] rows = IntStream.range(0, own.size()).filter(r -> !stopped[r]).toArray();
            if (rows.length == 0) {
                return null;
            }
            for (int r : rows) {
                SequenceSlots.checkRun(own.get(r), feed, r, 1, embeddingRows);
            }
            return queue(rows, false);
        }

        /**
         * Queues a step of {@code rows}: fed their picks at their positions, or {@code chained} on the step queued last
         * (one position further, their tokens its greedy ones); then the reads of its greedy tokens (and the logits of
         * the rows that ask, only in a step that is not chained) and its fence.
         */
        private Queued queue(int[] rows, boolean chained) {
            Encoded list = listFor(rows.length);
            List<CommandList.StepRow> steps = new ArrayList<>(rows.length);
            int[] inputs = new int[rows.length];
            int[] positions = new int[rows.length];
            Readout[] asks = new Readout[rows.length];
            for (int k = 0; k < rows.length; k++) {
                SequenceSlots.Slot slot = own.get(rows[k]);
                inputs[k] = chained ? Geometry.PREVIOUS_GREEDY : feed[rows[k]];
                positions[k] = slot.position() + (chained ? 1 : 0);
                asks[k] = readouts[rows[k]];
                steps.add(stepRow(inputs[k], positions[k], slot));
            }
            writeAndRun(list, steps);
            int run = runs++;
            queueReads(list, rows.length, asks, run % AREAS);
            fences[run % AREAS].set();
            boolean[] counts = new boolean[rows.length];
            Arrays.fill(counts, true);
            latest = new Queued(list, run, rows, inputs, positions, counts);
            return latest;
        }

        /**
         * Waits for {@code q}'s reads and gives the picker each counting row's readout, its sequence one position
         * further; {@code next}, the step chained on {@code q} if one is queued, learns each row's token, or that the
         * row does not count there.
         */
        private void collect(Queued q, Queued next) {
            fences[q.area()].await();
            int[] greedy = new int[q.rows().length];
            for (int k = 0; k < greedy.length; k++) {
                greedy[k] = readBack.get(ValueLayout.JAVA_INT, tokenAt(q.area(), k));
            }
            for (int k = 0; k < greedy.length; k++) {
                if (!q.counts()[k]) {
                    if (next != null) {
                        next.counts()[k] = false;
                    }
                    continue;
                }
                int r = q.rows()[k];
                SequenceSlots.Slot slot = own.get(r);
                Next got;
                if (!readouts[r].greedy()) {
                    got = new Next(logits(slot, 4L * vocab * k), greedy[k]);
                } else if (readouts[r].takes(greedy[k])) {
                    got = Next.greedy(greedy[k]);
                } else {
                    // the rare greedy row whose first maximum it bans: its logits
                    if (latest != q) {
                        rerun(q);
                    }
                    got = new Next(outputLogits(q.list(), k, slot), greedy[k]);
                }
                slot.advance(1);
                int token = picker.pick(r, got);
                if (token == STOP) {
                    stopped[r] = true;
                } else {
                    feed[r] = token;
                }
                if (next != null) {
                    // chained on the same rows in the same order
                    next.inputs()[k] = token;
                    next.counts()[k] = token == greedy[k];
                }
            }
        }

        /**
         * Step {@code q} once more, after the step chained on it has overwritten its logits: it writes the same KV rows
         * again, and the greedy tokens it leaves do not matter, since the chained step is discarded (a row of it does
         * not count: the one whose greedy token is banned) and the next step is fed the picks.
         */
        private void rerun(Queued q) {
            List<CommandList.StepRow> steps = new ArrayList<>(q.rows().length);
            for (int k = 0; k < q.rows().length; k++) {
                steps.add(stepRow(q.inputs()[k], q.positions()[k], own.get(q.rows()[k])));
            }
            writeAndRun(q.list(), steps);
            latest = q;
        }
    }

    @Override
    public int maxDrafts() {
        return maxDrafts;
    }

    /**
     * The draft list on {@code token} at the sequence's position (the NextN block's row there, from the token and the
     * trunk output the sequence kept), its greedy token read back as the draft and handed to {@code filter}; then the
     * token and the draft as two rows of the sequence through a batch list, which also computes the block's rows of
     * both positions from the trunk's outputs. Without a filter the verification reads the draft where the draft
     * list's argmax leaves it ({@link Geometry#PREVIOUS_GREEDY}), queued behind it with no wait; a filter (benchmarks)
     * needs the draft read back before the verification is queued.
     */
    @Override
    public Speculation speculate(Sequence sequence, int token, int drafts, Readout readout, DraftFilter filter) {
        if (maxDrafts == 0) {
            throw new UnsupportedOperationException("this pool does not draft");
        }
        SequenceSlots.Slot slot = slots.own(sequence);
        SequenceSlots.checkRun(slot, new int[] {token}, 0, 1, embeddingRows);
        int start = slot.position();
        int k = Math.max(0, Math.min(Math.min(drafts, maxDrafts), slot.capacity() - start - 1));
        // k is 0 or 1 (Geometry.MAX_DRAFTS): the draft list drafts one token, read into the second token area
        int[] drafted = new int[k];
        int[] rowTokens = k == 0 ? new int[] {token} : new int[] {token, Geometry.PREVIOUS_GREEDY};
        boolean chained = filter == DraftFilter.NONE;
        long draftAt = tokenAt(1, 0);
        if (k > 0) {
            writeAndRun(draft, List.of(stepRow(token, start, slot)));
            draft.bound().read(draft.activations(), draft.list().token(), readBack.asSlice(draftAt, 4));
            if (!chained) {
                runner.finish();
                drafted[0] = readBack.get(ValueLayout.JAVA_INT, draftAt);
                filter.replace(start + 1, drafted);
                rowTokens[1] = drafted[0];
                SequenceSlots.checkRun(slot, rowTokens, 0, k + 1, embeddingRows);
            }
        }
        List<CommandList.StepRow> rows = new ArrayList<>(k + 1);
        for (int i = 0; i <= k; i++) {
            rows.add(stepRow(rowTokens[i], start + i, slot));
        }
        Readout[] asks = new Readout[k + 1];
        Arrays.fill(asks, readout);
        Encoded list = listFor(k + 1);
        writeAndRun(list, rows);
        queueReads(list, k + 1, asks, 0);
        runner.finish();
        if (k > 0 && chained) {
            drafted[0] = readBack.get(ValueLayout.JAVA_INT, draftAt);
        }
        slot.advance(k + 1);
        return new Speculation(drafted, results(list, Collections.nCopies(k + 1, slot), asks, true));
    }

    /** Rows one list runs at most: the largest batch list's, or the decode list's one where the pool has no batch. */
    private int maxRows() {
        return batches.isEmpty() ? 1 : batches.getLast().list().tokens();
    }

    /** The decode list for one row, else the smallest batch list that holds {@code rows}. */
    private Encoded listFor(int rows) {
        return rows == 1
                ? decode
                : batches.stream()
                        .filter(b -> b.list().tokens() >= rows)
                        .findFirst()
                        .orElseThrow(() -> new IllegalArgumentException("no batch list holds " + rows + " rows"));
    }

    /**
     * Queues one step of {@code own} (at most {@link #maxRows}) and the reads of its results; the returned results wait
     * for them.
     */
    private Launched launchRows(List<SequenceSlots.Slot> own, int[] tokens, Readout[] readouts) {
        Encoded list = listFor(own.size());
        writeAndRun(list, rows(own, tokens));
        queueReads(list, own.size(), readouts, 0);
        return () -> {
            runner.finish();
            own.forEach(s -> s.advance(1));
            return results(list, own, readouts);
        };
    }

    private List<CommandList.StepRow> rows(List<SequenceSlots.Slot> own, int[] tokens) {
        List<CommandList.StepRow> rows = new ArrayList<>(own.size());
        for (int i = 0; i < own.size(); i++) {
            rows.add(stepRow(tokens[i], own.get(i).position(), own.get(i)));
        }
        return rows;
    }

    /** Token {@code token} of {@code slot}'s sequence at position {@code pos}. */
    private CommandList.StepRow stepRow(int token, int pos, SequenceSlots.Slot slot) {
        return new CommandList.StepRow(token, pos, kvRow(slot), slot.index());
    }

    /** The KV buffer row of {@code slot}'s position 0. */
    private int kvRow(SequenceSlots.Slot slot) {
        return slot.index() * slots.capacity();
    }

    /** Writes the StepArgs of {@code rows} (the rest of the list's rows: none) and runs the whole list. */
    private void writeAndRun(Encoded list, List<CommandList.StepRow> rows) {
        list.bound().writeSteps(list.list().steps(stepArgs, rows));
        list.bound().run(list.list().dispatches().size());
    }

    /**
     * Queues the reads of the first {@code rows} output rows' greedy tokens into token area {@code area}, and of the
     * logits of those that ask.
     */
    private void queueReads(Encoded list, int rows, Readout[] readouts, int area) {
        list.bound().read(list.activations(), list.list().token(), readBack.asSlice(tokenAt(area, 0), 4L * rows));
        for (int i = 0; i < rows; i++) {
            if (!readouts[i].greedy()) {
                list.bound()
                        .read(
                                list.activations(),
                                list.list().logits() + 4L * vocab * i,
                                readBack.asSlice(4L * vocab * i, 4L * vocab));
            }
        }
    }

    /** Where output row {@code row}'s greedy token lies in token area {@code area} of the read-back. */
    private long tokenAt(int area, int row) {
        return tokensAt + area * areaBytes + 4L * row;
    }

    /** What each row asked for, after its reads are done; a greedy row whose token it bans gets its logits now. */
    private Next[] results(Encoded list, List<SequenceSlots.Slot> own, Readout[] readouts) {
        return results(list, own, readouts, false);
    }

    /**
     * As {@link #results(Encoded, List, Readout[])}; with {@code fresh} each row's logits in an array of its own rather
     * than its slot's reused one (the rows of a speculative step are one sequence's: they share a slot).
     */
    private Next[] results(Encoded list, List<SequenceSlots.Slot> own, Readout[] readouts, boolean fresh) {
        Next[] out = new Next[own.size()];
        for (int i = 0; i < out.length; i++) {
            int greedy = readBack.get(ValueLayout.JAVA_INT, tokenAt(0, i));
            if (!readouts[i].greedy()) {
                float[] logits = logits(own.get(i), 4L * vocab * i);
                out[i] = new Next(fresh ? logits.clone() : logits, greedy);
            } else if (readouts[i].takes(greedy)) {
                out[i] = Next.greedy(greedy);
            }
        }
        // the rare greedy row whose first maximum is a banned token: its logits (the read-back's first row is free now)
        for (int i = 0; i < out.length; i++) {
            if (out[i] == null) {
                int greedy = readBack.get(ValueLayout.JAVA_INT, tokenAt(0, i));
                float[] logits = outputLogits(list, i, own.get(i));
                out[i] = new Next(fresh ? logits.clone() : logits, greedy);
            }
        }
        return out;
    }

    /**
     * Output row {@code row}'s logits of the last run of {@code list} (no run since), read now into the first row of
     * the read-back (free once the rows that asked have theirs) and handed out in {@code slot}'s array.
     */
    private float[] outputLogits(Encoded list, int row, SequenceSlots.Slot slot) {
        list.bound().read(list.activations(), list.list().logits() + 4L * vocab * row, readBack.asSlice(0, 4L * vocab));
        runner.finish();
        return logits(slot, 0);
    }

    /** The logits at {@code offset} of the read-back, in the array {@code slot} reuses. */
    private float[] logits(SequenceSlots.Slot slot, long offset) {
        float[] row = logits[slot.index()];
        if (row == null) {
            row = new float[vocab];
            logits[slot.index()] = row;
        }
        MemorySegment.copy(readBack, ValueLayout.JAVA_FLOAT, offset, row, 0, vocab);
        return row;
    }

    @Override
    public float[] partialStep(
            Sequence sequence, int token, int at, int dispatches, int buffer, long offset, int count) {
        SequenceSlots.Slot slot = slots.own(sequence);
        if (at >= slot.position()) {
            throw new IllegalArgumentException("position " + at + " has not been decoded yet");
        }
        decode.bound().writeSteps(decode.list().steps(stepArgs, List.of(stepRow(token, at, slot))));
        decode.bound().run(Math.min(dispatches, decode.list().dispatches().size()));
        MemorySegment into = readBack.asSlice(0, 4L * count);
        decode.bound().read(buffer, offset, into);
        runner.finish();
        return into.toArray(ValueLayout.JAVA_FLOAT);
    }

    @Override
    public Optional<KernelTimings> timings() {
        return runner.profiler().map(Timings::new);
    }

    /** A step or a prompt batch of this pool, profiled by the device's profiler. */
    private final class Timings implements KernelTimings {
        private final ListRunner.Profiler profiler;

        Timings(ListRunner.Profiler profiler) {
            this.profiler = profiler;
        }

        @Override
        public Profile profileStep(List<Sequence> sequences, int[] tokens) {
            List<SequenceSlots.Slot> own = slots.own(sequences);
            for (int i = 0; i < own.size(); i++) {
                SequenceSlots.checkRun(own.get(i), tokens, i, 1, embeddingRows);
            }
            Encoded list = listFor(own.size());
            list.bound().writeSteps(list.list().steps(stepArgs, rows(own, tokens)));
            Profile p = profiler.byLeavingOut(list.bound(), own.size());
            own.forEach(s -> s.advance(1));
            return p;
        }

        @Override
        public int promptBatch() {
            return prompt.list().tokens();
        }

        @Override
        public Profile profilePrompt(Sequence sequence, int[] tokens, int from, int count) {
            if (count > promptBatch()) {
                throw new IllegalArgumentException("a prompt batch holds at most " + promptBatch() + " tokens");
            }
            SequenceSlots.Slot slot = slots.own(sequence);
            SequenceSlots.checkRun(slot, tokens, from, count, embeddingRows);
            prompt.bound()
                    .writeSteps(prompt.list()
                            .steps(
                                    stepArgs,
                                    CommandList.consecutive(
                                            tokens, from, count, slot.position(), kvRow(slot), slot.index())));
            Profile p = profiler.byDispatch(prompt.bound(), count);
            slot.advance(count);
            return p;
        }
    }

    /** Frees the runner: its lists' buffers and encodings (the sequences must be closed first). */
    @Override
    public void close() {
        runner.close();
    }
}
