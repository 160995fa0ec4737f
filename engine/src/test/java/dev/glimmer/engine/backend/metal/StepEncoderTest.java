package dev.glimmer.engine.backend.metal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.backend.commandlist.DecodeModels;
import dev.glimmer.engine.backend.metal.RecordingCalls.Call;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.KernelLibrary;
import dev.glimmer.kernels.KernelSignature;
import dev.glimmer.kernels.Size3;
import dev.glimmer.kernels.decode.BufferSpec;
import dev.glimmer.kernels.decode.CommandList;
import dev.glimmer.kernels.decode.DecodeCommandListBuilder;
import dev.glimmer.kernels.decode.Dispatch;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The calls the step encoder makes for the decode command list of the oracle's tiny Q4_0 model,
 * recorded and checked against the list: every dispatch, binding, offset, threadgroup memory length,
 * grid and barrier; offsets under 4 GiB; at most 31 bindings; every bound buffer declared resident.
 */
class StepEncoderTest {

    private static final long BUFFERS = 0x1000_0000L;
    private static final long PIPELINES = 0x2000_0000L;
    private static final MemorySegment QUEUE = MemorySegment.ofAddress(0x5000_0000L);

    private static CommandList list;
    private static List<MemorySegment> buffers;
    /** Apple's threadgroup memory: what a dispatch of the list may use, static memory included. */
    private static final long MAX_THREADGROUP_MEMORY = 32 * 1024;

    private static Map<String, Pipeline> pipelines;

    @BeforeAll
    static void buildTheTinyModelsList() throws IOException {
        try (GlmModel model = GlmModel.open(Oracle.model("tiny-q4_0"))) {
            list = DecodeCommandListBuilder.build(DecodeModels.of(model.file(), model.config()), 64);
        }
        buffers = new ArrayList<>();
        for (int i = 0; i < list.buffers().size(); i++) {
            buffers.add(MemorySegment.ofAddress(BUFFERS + i));
        }
        pipelines = new HashMap<>();
        List<KernelSignature> kernels = KernelLibrary.load().kernels();
        for (int k = 0; k < kernels.size(); k++) {
            pipelines.put(kernels.get(k).name(), new Pipeline(MemorySegment.ofAddress(PIPELINES + k), 1024, 0));
        }
    }

    /** The encoder of the tiny model's list on {@code calls}, within generous limits. */
    private static StepEncoder encoder(MetalCalls calls, StepEncoder.Mode mode) {
        return new StepEncoder(calls, list, buffers, pipelines, MAX_THREADGROUP_MEMORY, mode);
    }

    private static long pipeline(Dispatch d) {
        return pipelines.get(d.kernel()).state().address();
    }

    @Test
    void theIndirectCommandBufferHoldsEveryDispatchOfTheList() {
        RecordingCalls rec = new RecordingCalls();
        encoder(rec, StepEncoder.Mode.INDIRECT);
        int n = list.dispatches().size();
        int maxBindings = list.dispatches().stream()
                .mapToInt(d -> d.bindings().size())
                .max()
                .orElseThrow();
        assertTrue(maxBindings <= Geometry.MAX_BUFFER_BINDINGS);
        assertEquals(new Call("newIndirectCommandBuffer", n, maxBindings), rec.calls.getFirst());

        // Group the remaining calls by the command they address.
        Map<Long, List<Call>> byCommand = new HashMap<>();
        List<Long> order = new ArrayList<>();
        for (Call c : rec.calls.subList(1, rec.calls.size())) {
            long command = c.method().equals("indirectComputeCommand")
                    ? RecordingCalls.COMMANDS + (int) c.args().get(1)
                    : (long) c.args().getFirst();
            if (c.method().equals("indirectComputeCommand")) {
                assertEquals(RecordingCalls.ICB, c.args().getFirst());
                order.add(command);
            }
            byCommand.computeIfAbsent(command, k -> new ArrayList<>()).add(c);
        }
        assertEquals(n, byCommand.size(), "one command per dispatch");
        assertEquals(n, new HashSet<>(order).size(), "each command fetched once");

        KernelLibrary library = KernelLibrary.load();
        for (int i = 0; i < n; i++) {
            Dispatch d = list.dispatches().get(i);
            List<Call> calls = byCommand.get(RecordingCalls.COMMANDS + i);
            long cmd = RecordingCalls.COMMANDS + i;
            String at = "dispatch " + i + " (" + d.kernel() + ")";
            assertEquals(new Call("indirectComputeCommand", RecordingCalls.ICB, i), calls.getFirst(), at);
            assertEquals(
                    List.of(new Call("setComputePipelineState", cmd, pipeline(d))),
                    only(calls, "setComputePipelineState"),
                    at);

            List<Call> expectedBindings = new ArrayList<>();
            for (Dispatch.Binding b : d.bindings()) {
                expectedBindings.add(new Call("setKernelBuffer", cmd, BUFFERS + b.buffer(), b.offset(), b.index()));
            }
            List<Call> bindings = only(calls, "setKernelBuffer");
            assertEquals(expectedBindings, bindings, at);
            assertTrue(bindings.size() <= Geometry.MAX_BUFFER_BINDINGS, at);
            Set<Integer> indices = new HashSet<>();
            for (Call b : bindings) {
                assertTrue((long) b.args().get(2) < (1L << 32), at + ": offset under 4 GiB");
                indices.add((int) b.args().get(3));
            }
            assertEquals(
                    library.kernel(d.kernel()).bufferCount(),
                    indices.size(),
                    at + ": every buffer index of the kernel bound once");

            List<Call> expectedMemory = new ArrayList<>();
            for (int m = 0; m < d.threadgroupMemory().length; m++) {
                expectedMemory.add(new Call("setThreadgroupMemoryLength", cmd, (long) d.threadgroupMemory()[m], m));
                assertEquals(0, d.threadgroupMemory()[m] % 16, at);
            }
            assertEquals(expectedMemory, only(calls, "setThreadgroupMemoryLength"), at);
            assertEquals(
                    List.of(new Call("concurrentDispatchThreadgroups", cmd, d.grid(), d.threads())),
                    only(calls, "concurrentDispatchThreadgroups"),
                    at);
            assertEquals(d.barrier() ? List.of(new Call("setBarrier", cmd)) : List.of(), only(calls, "setBarrier"), at);
            assertEquals(i > 0, d.barrier(), at + ": every dispatch after the first waits for the earlier ones");
            assertEquals(
                    2 + expectedBindings.size() + expectedMemory.size() + 1 + (d.barrier() ? 1 : 0),
                    calls.size(),
                    at + ": no other calls");
        }
    }

    // Each test records one step in one mode and reads the calls it expects; the set-up lines are shared in form.
    @Test
    void aStepDeclaresEveryBufferResidentAndExecutesTheWholeRange() {
        RecordingCalls rec = new RecordingCalls();
        StepEncoder encoder = encoder(rec, StepEncoder.Mode.INDIRECT);
        rec.calls.clear();
        encoder.run(QUEUE);

        List<Long> weights = new ArrayList<>();
        List<Long> writable = new ArrayList<>();
        for (int i = 0; i < list.buffers().size(); i++) {
            (list.buffers().get(i).kind() == BufferSpec.Kind.WEIGHTS ? weights : writable).add(BUFFERS + i);
        }
        long enc = RecordingCalls.ENCODER;
        assertEquals(
                List.of(
                        new Call("commandBuffer", QUEUE.address()),
                        new Call("computeCommandEncoder", RecordingCalls.COMMAND_BUFFER),
                        new Call("useResources", enc, weights, MetalCalls.USAGE_READ),
                        new Call("useResources", enc, writable, MetalCalls.USAGE_READ_WRITE),
                        new Call(
                                "executeCommandsInBuffer",
                                enc,
                                RecordingCalls.ICB,
                                0,
                                list.dispatches().size()),
                        new Call("endEncoding", enc),
                        new Call("commitAndWait", RecordingCalls.COMMAND_BUFFER)),
                rec.calls);

        Set<Long> declared = new HashSet<>(weights);
        declared.addAll(writable);
        for (Dispatch d : list.dispatches()) {
            for (Dispatch.Binding b : d.bindings()) {
                assertTrue(declared.contains(BUFFERS + b.buffer()), d.kernel() + " binds an undeclared buffer");
                if (list.buffers().get(b.buffer()).kind() != BufferSpec.Kind.WEIGHTS) {
                    assertTrue(writable.contains(BUFFERS + b.buffer()));
                }
            }
        }
        assertFalse(weights.isEmpty());
    }

    @Test
    void m1AndM2DispatchEachPipelineOnceWithAnEmptyGridBeforeTheIndirectBuffer() {
        RecordingCalls rec = new RecordingCalls();
        StepEncoder encoder = encoder(rec, StepEncoder.Mode.INDIRECT_WITH_EMPTY_DISPATCHES);
        rec.calls.clear();
        encoder.run(QUEUE);

        long enc = RecordingCalls.ENCODER;
        Set<Long> used = new LinkedHashSet<>();
        list.dispatches().forEach(d -> used.add(pipeline(d)));
        List<Call> expected = new ArrayList<>();
        for (long p : used) {
            expected.add(new Call("encoderSetComputePipelineState", enc, p));
            expected.add(new Call("dispatchEmptyGrid", enc));
        }
        assertEquals(expected, rec.calls.subList(2, 2 + expected.size()));
        assertEquals("useResources", rec.calls.get(2 + expected.size()).method());
        assertEquals(
                new Call(
                        "executeCommandsInBuffer",
                        enc,
                        RecordingCalls.ICB,
                        0,
                        list.dispatches().size()),
                rec.calls.get(4 + expected.size()));
    }

    @Test
    void virtualDevicesEncodeTheSameListDirectlyEveryStep() {
        RecordingCalls rec = new RecordingCalls();
        StepEncoder encoder = encoder(rec, StepEncoder.Mode.DIRECT);
        assertEquals(List.of(), rec.calls, "no indirect command buffer");
        encoder.run(QUEUE);

        long enc = RecordingCalls.ENCODER;
        List<Call> expected = new ArrayList<>();
        expected.add(new Call("commandBuffer", QUEUE.address()));
        expected.add(new Call("computeCommandEncoder", RecordingCalls.COMMAND_BUFFER));
        for (Dispatch d : list.dispatches()) {
            expected.add(new Call("encoderSetComputePipelineState", enc, pipeline(d)));
            for (Dispatch.Binding b : d.bindings()) {
                expected.add(new Call("encoderSetBuffer", enc, BUFFERS + b.buffer(), b.offset(), b.index()));
            }
            for (int m = 0; m < d.threadgroupMemory().length; m++) {
                expected.add(new Call("encoderSetThreadgroupMemoryLength", enc, (long) d.threadgroupMemory()[m], m));
            }
            expected.add(new Call("dispatchThreadgroups", enc, d.grid(), d.threads()));
        }
        expected.add(new Call("endEncoding", enc));
        expected.add(new Call("commitAndWait", RecordingCalls.COMMAND_BUFFER));
        assertEquals(expected, rec.calls);
    }

    /** The self-test's diagnosis runs the first dispatches of a step: a prefix of the same range, or of the direct encoding. */
    @Test
    void aPartialStepRunsAPrefixOfTheList() {
        RecordingCalls rec = new RecordingCalls();
        StepEncoder indirect = encoder(rec, StepEncoder.Mode.INDIRECT);
        rec.calls.clear();
        indirect.run(QUEUE, 5);
        assertEquals(
                new Call("executeCommandsInBuffer", RecordingCalls.ENCODER, RecordingCalls.ICB, 0, 5),
                rec.calls.get(4));

        RecordingCalls direct = new RecordingCalls();
        encoder(direct, StepEncoder.Mode.DIRECT).run(QUEUE, 5);
        List<Call> dispatched = only(direct.calls, "dispatchThreadgroups");
        assertEquals(5, dispatched.size());
        for (int i = 0; i < 5; i++) {
            assertEquals(
                    list.dispatches().get(i).grid(), dispatched.get(i).args().get(1));
        }
        assertThrows(
                IllegalArgumentException.class,
                () -> indirect.run(QUEUE, list.dispatches().size() + 1));
        assertThrows(IllegalArgumentException.class, () -> indirect.run(QUEUE, 0));
    }

    @Test
    void refusesOffsetsBeyond32BitsAndMoreThan31Bindings() {
        List<BufferSpec> specs = List.of(new BufferSpec("weights.0", BufferSpec.Kind.WEIGHTS, 1L << 33, 0));
        List<MemorySegment> one = List.of(MemorySegment.ofAddress(BUFFERS));
        Dispatch far = new Dispatch(
                "mat_vec",
                0,
                List.of(new Dispatch.Binding(0, 0, 1L << 32)),
                Size3.of(1),
                Size3.of(64),
                new int[0],
                false,
                List.of());
        IllegalArgumentException e = assertThrows(
                IllegalArgumentException.class,
                () -> new StepEncoder(
                        new RecordingCalls(),
                        new CommandList(specs, new byte[0], List.of(far), 0, 0, 1, 1),
                        one,
                        pipelines,
                        MAX_THREADGROUP_MEMORY,
                        StepEncoder.Mode.INDIRECT));
        assertTrue(e.getMessage().contains("32-bit"), e.getMessage());

        List<Dispatch.Binding> many = new ArrayList<>();
        for (int i = 0; i < 32; i++) {
            many.add(new Dispatch.Binding(i, 0, 0));
        }
        Dispatch wide = new Dispatch("mat_vec", 0, many, Size3.of(1), Size3.of(64), new int[0], false, List.of());
        e = assertThrows(
                IllegalArgumentException.class,
                () -> new StepEncoder(
                        new RecordingCalls(),
                        new CommandList(specs, new byte[0], List.of(wide), 0, 0, 1, 1),
                        one,
                        pipelines,
                        MAX_THREADGROUP_MEMORY,
                        StepEncoder.Mode.INDIRECT));
        assertTrue(e.getMessage().contains("31"), e.getMessage());
    }

    @Test
    void aDispatchBeyondItsPipelinesThreadsOrTheDevicesThreadgroupMemoryIsRefusedBeforeAnythingIsEncoded() {
        Dispatch widest = list.dispatches().stream()
                .max(java.util.Comparator.comparingInt(
                        d -> d.threads().x() * d.threads().y() * d.threads().z()))
                .orElseThrow();
        int threads =
                widest.threads().x() * widest.threads().y() * widest.threads().z();
        Map<String, Pipeline> narrow = new HashMap<>(pipelines);
        narrow.put(widest.kernel(), new Pipeline(pipelines.get(widest.kernel()).state(), threads - 32, 0));
        RecordingCalls rec = new RecordingCalls();
        MetalException e = assertThrows(
                MetalException.class,
                () -> new StepEncoder(rec, list, buffers, narrow, MAX_THREADGROUP_MEMORY, StepEncoder.Mode.INDIRECT));
        assertEquals(
                "encoding the command lists: kernel " + widest.kernel() + " is dispatched with " + threads
                        + " threads per threadgroup, but its pipeline allows at most " + (threads - 32)
                        + " on this GPU",
                e.getMessage());
        assertEquals(List.of(), rec.calls);
        // Exactly at the limit is fine.
        narrow.put(widest.kernel(), new Pipeline(pipelines.get(widest.kernel()).state(), threads, 0));
        new StepEncoder(new RecordingCalls(), list, buffers, narrow, MAX_THREADGROUP_MEMORY, StepEncoder.Mode.INDIRECT);

        Dispatch most = list.dispatches().stream()
                .max(java.util.Comparator.comparingInt(Dispatch::threadgroupMemoryBytes))
                .orElseThrow();
        assertTrue(most.threadgroupMemoryBytes() > 0);
        long fits = MAX_THREADGROUP_MEMORY - most.threadgroupMemoryBytes();
        Map<String, Pipeline> heavy = new HashMap<>(pipelines);
        heavy.put(most.kernel(), new Pipeline(pipelines.get(most.kernel()).state(), 1024, fits));
        new StepEncoder(new RecordingCalls(), list, buffers, heavy, MAX_THREADGROUP_MEMORY, StepEncoder.Mode.DIRECT);
        heavy.put(most.kernel(), new Pipeline(pipelines.get(most.kernel()).state(), 1024, fits + 16));
        e = assertThrows(
                MetalException.class,
                () -> new StepEncoder(
                        new RecordingCalls(), list, buffers, heavy, MAX_THREADGROUP_MEMORY, StepEncoder.Mode.DIRECT));
        assertEquals(
                "encoding the command lists: kernel " + most.kernel() + " needs " + (MAX_THREADGROUP_MEMORY + 16)
                        + " bytes of threadgroup memory (" + (fits + 16) + " of them static), but this GPU has "
                        + MAX_THREADGROUP_MEMORY,
                e.getMessage());
    }

    @Test
    void theEncoderReleasesItsIndirectBufferOnCloseAndWhenEncodingFailsPartWay() {
        RecordingCalls rec = new RecordingCalls();
        StepEncoder encoder = encoder(rec, StepEncoder.Mode.INDIRECT);
        assertEquals(List.of(), only(rec.calls, "release"));
        encoder.close();
        assertEquals(List.of(new Call("release", RecordingCalls.ICB)), only(rec.calls, "release"));

        RecordingCalls failing = new RecordingCalls().failAt("setKernelBuffer", 7);
        assertThrows(MetalException.class, () -> encoder(failing, StepEncoder.Mode.INDIRECT));
        assertEquals(new Call("release", RecordingCalls.ICB), failing.calls.getLast());
        assertEquals(1, only(failing.calls, "release").size());

        RecordingCalls direct = new RecordingCalls();
        encoder(direct, StepEncoder.Mode.DIRECT).close();
        assertEquals(List.of(), direct.calls, "no indirect command buffer to release");
    }

    private static List<Call> only(List<Call> calls, String method) {
        return calls.stream().filter(c -> c.method().equals(method)).toList();
    }
}
