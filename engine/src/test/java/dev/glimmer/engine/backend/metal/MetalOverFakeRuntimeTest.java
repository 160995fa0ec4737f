package dev.glimmer.engine.backend.metal;

import static dev.glimmer.engine.backend.SequencePool.Readout.GREEDY;
import static dev.glimmer.engine.backend.SequencePool.Readout.LOGITS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.backend.SequencePool;
import dev.glimmer.engine.backend.SequenceSlots;
import dev.glimmer.engine.backend.commandlist.CommandListPool;
import dev.glimmer.engine.backend.commandlist.DecodeModels;
import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import dev.glimmer.kernels.ArgStruct;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.KernelLibrary;
import dev.glimmer.kernels.Size3;
import dev.glimmer.kernels.decode.BufferSpec;
import dev.glimmer.kernels.decode.CommandList;
import dev.glimmer.kernels.decode.DecodeCommandListBuilder;
import dev.glimmer.kernels.decode.DecodeModel;
import dev.glimmer.kernels.decode.Dispatch;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.DisabledOnOs;
import org.junit.jupiter.api.condition.OS;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The real Metal backend classes (FFM handles, method table, device, decoder) talking to a logging
 * stand-in for libobjc and Metal: every message must be one the stand-in knows, with arguments that
 * decode to the command list's values (MTLSize and NSRange by value included); every owned object
 * is released on close, and every autoreleased one has a pool. Not on macOS: there the stand-in's
 * variadic objc_msgSend would read its arguments from the stack (Apple's arm64 convention) while the
 * backend passes them in registers, as the real one expects; on Linux both read registers.
 */
@DisabledOnOs(OS.MAC)
class MetalOverFakeRuntimeTest {

    private static final int TOKENS = 2;

    private static List<String> starting(List<String> log, String prefix) {
        return log.stream().filter(l -> l.startsWith(prefix)).toList();
    }

    private static String size(Size3 s) {
        return s.x() + "x" + s.y() + "x" + s.z();
    }

    private static void assertClean(FakeObjcRuntime fake) throws Throwable {
        for (String line : fake.log()) {
            assertTrue(!line.startsWith("UNKNOWN") && !line.startsWith("BAD") && !line.startsWith("LEAK"), line);
        }
        assertEquals(0, fake.liveOwned(), "owned objects left unreleased");
        assertEquals(0, fake.poolDepth(), "autorelease pools left open");
    }

    @Test
    void anM1DecodesWithTheIndirectBufferAndReleasesEverythingItOwns() throws Throwable {
        FakeObjcRuntime fake =
                FakeObjcRuntime.configure("Fake Apple M1", 7, null).withResidencySets();
        KernelLibrary kernels = KernelLibrary.load();
        CommandList list;
        CommandList prompt;
        try (GlmModel model = GlmModel.open(Oracle.model("tiny-q4_0"));
                MetalDevice device = fake.openDevice()) {
            assertEquals("Fake Apple M1", device.name());
            assertEquals("Fake Apple M1 (Apple7, INDIRECT_WITH_EMPTY_DISPATCHES)", device.describe());
            assertEquals(StepEncoder.Mode.INDIRECT_WITH_EMPTY_DISPATCHES, device.mode());
            try (CommandListPool pool = pool(device, model, 1, 8);
                    SequencePool.Sequence decoder = pool.open()) {
                list = pool.commandList();
                prompt = DecodeCommandListBuilder.build(
                        DecodeModels.of(model.file(), model.config()), 8, Geometry.PROMPT_TOKENS);
                // a prompt of TOKENS (the prompt command list), then one decode step
                float[] logits = pool.prompt(decoder, new int[] {5, 9}, 0, TOKENS, LOGITS)
                        .logits();
                assertEquals(model.vocabSize(), logits.length);
                assertEquals(
                        model.vocabSize(),
                        pool.prompt(decoder, new int[] {7}, 0, 1, LOGITS).logits().length);
                assertEquals(TOKENS + 1, decoder.position());
            }
        }
        List<String> log = fake.log();
        assertClean(fake);

        // Compilation: the whole library source with fast math off (the kernels rely on -INFINITY), every kernel as an
        // ICB-capable pipeline whose limits are read.
        int sourceBytes = kernels.metalSource().getBytes(StandardCharsets.UTF_8).length;
        assertEquals(List.of("setFastMathEnabled: 0 on MTLCompileOptions"), starting(log, "setFastMath"));
        assertTrue(log.indexOf("setFastMathEnabled: 0 on MTLCompileOptions")
                < log.indexOf(starting(log, "newLibraryWithSource").getFirst()));
        assertEquals(
                List.of("newLibraryWithSource:options:error: source " + sourceBytes
                        + " bytes, options MTLCompileOptions, error out given"),
                starting(log, "newLibraryWithSource"));
        assertEquals(
                kernels.kernels().stream()
                        .map(k -> "newFunctionWithName: " + k.name())
                        .toList(),
                starting(log, "newFunctionWithName"));
        assertEquals(
                kernels.kernels().size(),
                starting(log, "setSupportIndirectCommandBuffers: 1").size());

        // Two indirect command buffers, the decode step's and the prompt list's: their descriptors, then each dispatch.
        List<String> descriptors = new ArrayList<>();
        List<String> icbs = new ArrayList<>();
        List<String> dispatches = new ArrayList<>();
        List<String> bindings = new ArrayList<>();
        int barriers = 0;
        for (CommandList l : List.of(list, prompt)) {
            int maxBindings = l.dispatches().stream()
                    .mapToInt(d -> d.bindings().size())
                    .max()
                    .orElseThrow();
            descriptors.addAll(List.of("setCommandTypes: 32", "setMaxKernelBufferBindCount: " + maxBindings));
            icbs.add(
                    "newIndirectCommandBufferWithDescriptor:maxCommandCount:options: MTLIndirectCommandBufferDescriptor "
                            + l.dispatches().size() + " 0");
            for (Dispatch d : l.dispatches()) {
                dispatches.add("concurrentDispatchThreadgroups:threadsPerThreadgroup: " + size(d.grid()) + " "
                        + size(d.threads()));
                for (Dispatch.Binding b : d.bindings()) {
                    bindings.add("setKernelBuffer:offset:atIndex: MTLBuffer " + b.offset() + " " + b.index());
                }
            }
            barriers += l.dispatches().size() - 1;
        }
        assertEquals(
                descriptors,
                log.stream()
                        .filter(l -> l.startsWith("setCommandTypes") || l.startsWith("setMaxKernelBufferBindCount"))
                        .toList());
        assertEquals(
                List.of(
                        "setInheritPipelineState: 0",
                        "setInheritBuffers: 0",
                        "setInheritPipelineState: 0",
                        "setInheritBuffers: 0"),
                starting(log, "setInherit"));
        assertEquals(icbs, starting(log, "newIndirectCommandBuffer"));
        assertEquals(dispatches, starting(log, "concurrentDispatch"));
        assertEquals(bindings, starting(log, "setKernelBuffer"));
        assertEquals(barriers, starting(log, "setBarrier").size());

        // Buffers: the weights wrapped in place, page-aligned, once; the KV cache shared by the two lists; the rest
        // allocated shared.
        long page = fake.runtime().pageSize();
        List<String> wrapped = starting(log, "newBufferWithBytesNoCopy");
        int weights = (int) list.buffers().stream()
                .filter(b -> b.kind() == BufferSpec.Kind.WEIGHTS)
                .count();
        assertEquals(weights, wrapped.size());
        for (String w : wrapped) {
            String[] f = w.split(" ");
            assertEquals(0, Long.decode(f[1]) % page, w);
            assertEquals(0, Long.parseLong(f[2]) % page, w);
            assertEquals("0", f[3], w);
            assertEquals("(nil)", f[4], w);
        }
        long promptOwn = prompt.buffers().stream()
                .filter(b -> b.kind() != BufferSpec.Kind.WEIGHTS && !b.kind().pooled())
                .count();
        assertEquals(
                list.buffers().size() - weights + promptOwn,
                starting(log, "newBufferWithLength:options:").size());

        // Each run (the prompt batch, then the decode step): the M1 workaround, residency, the whole range.
        Set<String> pipelines = new LinkedHashSet<>();
        list.dispatches().forEach(d -> pipelines.add(d.kernel()));
        Set<String> promptPipelines = new LinkedHashSet<>();
        prompt.dispatches().forEach(d -> promptPipelines.add(d.kernel()));
        assertEquals(
                pipelines.size() + promptPipelines.size(),
                starting(log, "dispatchThreadgroups:threadsPerThreadgroup: 0x0x0 0x0x0")
                        .size());
        assertEquals(
                List.of(
                        "executeCommandsInBuffer:withRange: MTLIndirectCommandBuffer 0 "
                                + prompt.dispatches().size(),
                        "executeCommandsInBuffer:withRange: MTLIndirectCommandBuffer 0 "
                                + list.dispatches().size()),
                starting(log, "executeCommandsInBuffer"));
        assertEquals(
                2,
                starting(log, "useResources:count:usage: " + weights + " (" + weights + " buffers) 1")
                        .size());
        int others = list.buffers().size() - weights;
        int promptOthers = prompt.buffers().size() - weights;
        assertEquals(
                List.of(
                        "useResources:count:usage: " + promptOthers + " (" + promptOthers + " buffers) 3",
                        "useResources:count:usage: " + others + " (" + others + " buffers) 3"),
                log.stream()
                        .filter(l -> l.startsWith("useResources") && l.endsWith(" 3"))
                        .toList());
        assertEquals(2, starting(log, "waitUntilCompleted").size());

        // The weights stay resident between tokens: a residency set on the queue, ended on close.
        List<String> residency = log.stream()
                .filter(l -> l.contains("esidency")
                        || l.startsWith("addAllocation")
                        || l.equals("commit on MTLResidencySet"))
                .toList();
        List<String> expected = new ArrayList<>(List.of(
                "respondsToSelector: newResidencySetWithDescriptor:error:",
                "new -> owned MTLResidencySetDescriptor",
                "newResidencySetWithDescriptor:error: MTLResidencySetDescriptor error-out",
                "release MTLResidencySetDescriptor"));
        for (int i = 0; i < weights; i++) {
            expected.add("addAllocation: MTLBuffer on MTLResidencySet");
        }
        expected.addAll(List.of(
                "commit on MTLResidencySet",
                "requestResidency on MTLResidencySet",
                "addResidencySet: MTLResidencySet on MTLCommandQueue",
                "removeResidencySet: MTLResidencySet on MTLCommandQueue",
                "endResidency on MTLResidencySet",
                "release MTLResidencySet"));
        assertEquals(expected, residency);
        assertTrue(
                log.indexOf("addResidencySet: MTLResidencySet on MTLCommandQueue") < log.indexOf("commandBuffer"),
                "attached before the first step");
    }

    /**
     * A pool of several slots (issue #19): every list (decode, prompt, the 2- and 4-row batch lists) encoded once
     * over one KV buffer per layer of slots × capacity rows; a step of three sequences at different positions runs
     * the 4-row list once, its step buffer holding each row's token, position, KV length and first KV row (its
     * slot's), then an empty row; two sequences run the 2-row list; a closed sequence's slot goes to the next one;
     * and everything owned is released.
     */
    @Test
    void aPoolStepsSequencesAtTheirOwnPositionsThroughOneBatchList() throws Throwable {
        FakeObjcRuntime fake = FakeObjcRuntime.configure("Fake Apple M3", 9, null);
        ArgStruct stepArgs = KernelLibrary.load().struct("StepArgs");
        assertEquals(
                List.of("token", "pos", "kv_len", "kv_row", "slot"),
                stepArgs.fields().stream().map(ArgStruct.Field::name).toList(),
                "the layout this test reads");
        int slots = 4;
        int capacity = 8;
        try (GlmModel model = GlmModel.open(Oracle.model("tiny-q4_0"));
                MetalDevice device = fake.openDevice()) {
            DecodeModel shape = DecodeModels.of(model.file(), model.config());
            long kvRows = (long) slots * capacity;
            List<CommandList> lists = List.of(
                    DecodeCommandListBuilder.build(shape, kvRows),
                    DecodeCommandListBuilder.build(shape, kvRows, Geometry.PROMPT_TOKENS),
                    DecodeCommandListBuilder.batch(shape, kvRows, 2),
                    DecodeCommandListBuilder.batch(shape, kvRows, 4));
            CommandList decode = lists.get(0);
            try (CommandListPool pool = pool(device, model, slots, capacity)) {
                List<String> log = fake.log();
                assertEquals(
                        lists.stream()
                                .map(l -> "newIndirectCommandBufferWithDescriptor:maxCommandCount:options:"
                                        + " MTLIndirectCommandBufferDescriptor "
                                        + l.dispatches().size() + " 0")
                                .toList(),
                        starting(log, "newIndirectCommandBuffer"));
                List<String> dispatches = new ArrayList<>();
                lists.forEach(l -> l.dispatches()
                        .forEach(d -> dispatches.add("concurrentDispatchThreadgroups:threadsPerThreadgroup: "
                                + size(d.grid()) + " " + size(d.threads()))));
                assertEquals(dispatches, starting(log, "concurrentDispatch"));

                // One KV pool: made once, with a slot's rows per sequence, and bound by every list.
                long weights = decode.buffers().stream()
                        .filter(b -> b.kind() == BufferSpec.Kind.WEIGHTS)
                        .count();
                long made = decode.buffers().size() - weights;
                for (CommandList l : lists.subList(1, lists.size())) {
                    made += l.buffers().stream()
                            .filter(b -> b.kind() != BufferSpec.Kind.WEIGHTS
                                    && !b.kind().pooled())
                            .count();
                }
                assertEquals(made, starting(log, "newBufferWithLength:options:").size());
                long kvBytes = decode.buffers().stream()
                        .filter(b -> b.kind() == BufferSpec.Kind.KV_CACHE)
                        .mapToLong(BufferSpec::bytes)
                        .sum();
                assertEquals(kvBytes / slots, pool.bytesPerSequence());
                assertEquals(pool.bytesPerSequence(), CommandListPool.bytesPerSequence(model, capacity));
                assertEquals(slots, pool.slots());
                for (BufferSpec kv : decode.buffers().stream()
                        .filter(b -> b.kind() == BufferSpec.Kind.KV_CACHE)
                        .toList()) {
                    long address = bound(fake, lists, 0, kv).address();
                    for (int l = 1; l < lists.size(); l++) {
                        assertEquals(
                                address, bound(fake, lists, l, kv).address(), "list " + l + " binds the pool's " + kv);
                    }
                }

                // Three sequences at positions 3, 1 and 2 (prompts through the prompt list and the decode list).
                SequencePool.Sequence a = pool.open();
                SequencePool.Sequence b = pool.open();
                SequencePool.Sequence c = pool.open();
                pool.prompt(a, new int[] {5, 9, 4}, 0, 3, LOGITS);
                pool.prompt(b, new int[] {6}, 0, 1, LOGITS);
                pool.prompt(c, new int[] {7, 8}, 0, 2, LOGITS);
                assertEquals(
                        List.of(0, capacity, 2 * capacity),
                        List.of(kvRow(a, capacity), kvRow(b, capacity), kvRow(c, capacity)));
                assertEquals(3, pool.inUse());
                int runs = starting(fake.log(), "executeCommandsInBuffer").size();
                SequencePool.Next[] next = pool.step(
                        List.of(a, b, c), new int[] {11, 12, 13}, new SequencePool.Readout[] {LOGITS, GREEDY, LOGITS});
                List<String> executed = starting(fake.log(), "executeCommandsInBuffer");
                assertEquals(
                        List.of("executeCommandsInBuffer:withRange: MTLIndirectCommandBuffer 0 "
                                + lists.get(3).dispatches().size()),
                        executed.subList(runs, executed.size()),
                        "one run of the 4-row list");
                assertEquals(
                        List.of(
                                List.of(11, 3, 4, 0, 0),
                                List.of(12, 1, 2, capacity, 1),
                                List.of(13, 2, 3, 2 * capacity, 2),
                                List.of(0, 0, 0, 0, 0)),
                        stepRows(fake, lists, 3, stepArgs));
                assertEquals(model.vocabSize(), next[0].logits().length);
                assertEquals(null, next[1].logits(), "a greedy-only row reads no logits");
                assertEquals(0, next[1].greedyToken(), "the stand-in computes nothing: the argmax's output stays 0");
                assertEquals(model.vocabSize(), next[2].logits().length);
                assertEquals(List.of(4, 2, 3), List.of(a.position(), b.position(), c.position()));

                // All slots taken: a fifth is refused. Closing b frees its slot for the next sequence.
                SequencePool.Sequence d = pool.open();
                assertEquals(3 * capacity, kvRow(d, capacity));
                assertEquals(
                        "all 4 sequences of the pool are in use",
                        assertThrows(IllegalStateException.class, pool::open).getMessage());
                b.close();
                assertEquals(3, pool.inUse());
                assertThrows(
                        IllegalStateException.class,
                        () -> pool.step(List.of(a, b), new int[] {1, 2}, new SequencePool.Readout[] {LOGITS, LOGITS}),
                        "a closed sequence");
                SequencePool.Sequence e = pool.open();
                assertEquals(capacity, kvRow(e, capacity), "b's slot");
                assertEquals(0, e.position());
                assertThrows(
                        IllegalArgumentException.class,
                        () -> pool.step(List.of(a, a), new int[] {1, 2}, new SequencePool.Readout[] {LOGITS, LOGITS}));
                pool.step(List.of(e, a), new int[] {14, 15}, new SequencePool.Readout[] {GREEDY, GREEDY});
                assertEquals(
                        List.of(List.of(14, 0, 1, capacity, 1), List.of(15, 4, 5, 0, 0)),
                        stepRows(fake, lists, 2, stepArgs),
                        "two rows run the 2-row list");
                pool.prompt(e, new int[] {16}, 0, 1, LOGITS);
                assertEquals(
                        List.of(List.of(16, 1, 2, capacity, 1)),
                        stepRows(fake, lists, 0, stepArgs),
                        "one runs the decode step");
                for (SequencePool.Sequence q : List.of(a, c, d, e)) {
                    q.close();
                }
                assertEquals(0, pool.inUse());
                assertTrue(pool.bytes() > kvBytes, "the KV pool and each list's activations, arguments and steps");
            }
        }
        assertClean(fake);
    }

    /**
     * Metal refusing a pool's 12th buffer, or the indirect command buffer of its last list (4 rows): everything made
     * is released.
     */
    @ParameterizedTest
    @CsvSource({
        "newIndirectCommandBufferWithDescriptor:maxCommandCount:options:, 4, ENCODING",
        "newBufferWithLength:options:, 12, BUFFERS"
    })
    void aPoolThatCannotBeMadeReleasesEverything(String selector, int nth, MetalException.Step step) throws Throwable {
        FakeObjcRuntime fake = FakeObjcRuntime.configure("Fake Apple M1", 7, null)
                .withResidencySets()
                .failing(selector, nth);
        try (GlmModel model = GlmModel.open(Oracle.model("tiny-q4_0"));
                MetalDevice device = fake.openDevice()) {
            MetalException e = assertThrows(MetalException.class, () -> pool(device, model, 4, 8));
            assertEquals(Optional.of(step), e.step(), e.getMessage());
        }
        assertTrue(fake.log().contains("FAILED " + selector + " (call " + nth + ")"), "the failure was injected");
        assertClean(fake);
    }

    /** The buffer of {@code lists.get(list)}'s first binding of {@code spec}, as the stand-in saw it bound. */
    private static MemorySegment bound(FakeObjcRuntime fake, List<CommandList> lists, int list, BufferSpec spec)
            throws Throwable {
        int buffer = lists.get(list).buffers().indexOf(spec);
        long nth = 0;
        for (int l = 0; l < lists.size(); l++) {
            for (Dispatch d : lists.get(l).dispatches()) {
                for (Dispatch.Binding b : d.bindings()) {
                    if (l == list && b.buffer() == buffer) {
                        return fake.boundContents(nth, Math.max(16, spec.bytes()));
                    }
                    nth++;
                }
            }
        }
        throw new AssertionError("list " + list + " never binds " + spec);
    }

    /** The StepArgs rows (token, pos, kv_len, kv_row) in the step buffer that list {@code list} binds. */
    private static List<List<Integer>> stepRows(
            FakeObjcRuntime fake, List<CommandList> lists, int list, ArgStruct stepArgs) throws Throwable {
        CommandList l = lists.get(list);
        MemorySegment step = bound(fake, lists, list, l.buffers().get(l.buffer(BufferSpec.Kind.STEP)));
        List<List<Integer>> rows = new ArrayList<>();
        for (int t = 0; t < l.tokens(); t++) {
            List<Integer> row = new ArrayList<>();
            for (int f = 0; f < stepArgs.fields().size(); f++) {
                row.add(step.get(ValueLayout.JAVA_INT, (long) t * stepArgs.size() + 4L * f));
            }
            rows.add(row);
        }
        return rows;
    }

    @Test
    void m3AndLaterSkipTheWorkaroundAndVirtualDevicesEncodeDirectly() throws Throwable {
        FakeObjcRuntime m3 = FakeObjcRuntime.configure("Fake Apple M3", 9, null);
        try (MetalDevice device = m3.openDevice()) {
            assertEquals(StepEncoder.Mode.INDIRECT, device.mode());
            assertEquals(9, device.appleFamily());
        }
        assertClean(m3);

        // A virtual device with the kernels' GPU family: direct encoding, so no pipeline asks for indirect command
        // buffers.
        FakeObjcRuntime vm = FakeObjcRuntime.configure("Apple Paravirtual device", 7, null);
        int n;
        try (GlmModel model = GlmModel.open(Oracle.model("tiny-q4_0"));
                MetalDevice device = vm.openDevice()) {
            assertEquals(StepEncoder.Mode.DIRECT, device.mode());
            try (CommandListPool pool = pool(device, model, 1, 8);
                    SequencePool.Sequence decoder = pool.open()) {
                n = pool.commandList().dispatches().size();
                pool.prompt(decoder, new int[] {5}, 0, 1, LOGITS);
            }
        }
        List<String> log = vm.log();
        assertClean(vm);
        assertEquals(List.of(), starting(log, "newIndirectCommandBuffer"));
        assertEquals(List.of(), starting(log, "setSupportIndirectCommandBuffers"));
        assertEquals(
                n, starting(log, "dispatchThreadgroups:threadsPerThreadgroup:").size());
        assertEquals(List.of(), starting(log, "executeCommandsInBuffer"));
        assertEquals(
                List.of("respondsToSelector: newResidencySetWithDescriptor:error:"),
                log.stream().filter(l -> l.contains("esidency")).toList(),
                "no residency set before macOS 15");
    }

    @Test
    void kernelsThatDoNotCompileAreReportedWithTheKernelAndMetalsMessage() throws Throwable {
        // Line 30 of matvec.metal lies in the body of mat_vec; line 1 is above every kernel.
        String inKernel = "matvec.metal:30:5: error: use of undeclared identifier 'oops'";
        FakeObjcRuntime fake = FakeObjcRuntime.configure("Fake Apple M2", 8, inKernel);
        MetalException e = assertThrows(MetalException.class, fake::openDevice);
        assertEquals("compiling the kernels: kernel mat_vec: " + inKernel, e.getMessage());
        assertEquals(Optional.of(MetalException.Step.COMPILING), e.step());
        assertClean(fake);

        String outside = "common.metal:1:1: error: unknown type name 'foo'";
        FakeObjcRuntime helper = FakeObjcRuntime.configure("Fake Apple M2", 8, outside);
        assertEquals(
                "compiling the kernels: " + outside,
                assertThrows(MetalException.class, helper::openDevice).getMessage());
        assertClean(helper);
    }

    /**
     * {@link ObjcRuntime#load()} opens the libraries by name, as dlopen takes them: on macOS they exist only in
     * the dyld shared cache, so a lookup that first resolves the name as a file fails on every Mac. Here the
     * same happens with names dlopen knows but the file system does not: libc's soname, and the stand-in's,
     * which dlopen finds among the loaded libraries.
     */
    @Test
    void theRuntimeOpensItsLibrariesByNameAsDlopenFindsThem() throws Throwable {
        FakeObjcRuntime fake = FakeObjcRuntime.configure("Fake Apple M1", 7, null);
        assertThrows(
                IllegalArgumentException.class,
                () -> SymbolLookup.libraryLookup(Path.of(FakeObjcRuntime.SONAME), Arena.global()),
                "the name is no file here, as /usr/lib/libobjc.A.dylib is none on a Mac");
        ObjcRuntime byName = ObjcRuntime.load(List.of("libc.so.6", FakeObjcRuntime.SONAME));
        assertEquals(fake.runtime().pageSize(), byName.pageSize());
        try (MetalDevice device = MetalDevice.open(byName, false)) {
            assertEquals("Fake Apple M1", device.name());
        }
        assertClean(fake);
        assertEquals(
                List.of(
                        "/usr/lib/libobjc.A.dylib",
                        "/System/Library/Frameworks/Foundation.framework/Foundation",
                        "/System/Library/Frameworks/CoreGraphics.framework/CoreGraphics",
                        "/System/Library/Frameworks/Metal.framework/Metal"),
                ObjcRuntime.LIBRARIES);

        MetalException missing = assertThrows(
                MetalException.class, () -> ObjcRuntime.load(List.of("libc.so.6", "libglimmer-no-such-library.so")));
        assertEquals(Optional.of(MetalException.Step.LOADING), missing.step());
        assertTrue(
                missing.getMessage().startsWith("loading libobjc and the Metal framework: ")
                        && missing.getMessage().contains("libglimmer-no-such-library.so"),
                missing.getMessage());
        MetalException noObjc = assertThrows(MetalException.class, () -> ObjcRuntime.load(List.of("libc.so.6")));
        assertEquals(
                "loading libobjc and the Metal framework: symbol objc_msgSend not found in [libc.so.6]",
                noObjc.getMessage());

        MetalException notAMac = assertThrows(MetalException.class, ObjcRuntime::load);
        assertEquals(
                "loading libobjc and the Metal framework: Metal needs macOS on Apple Silicon; this is "
                        + MetalPlatform.describe(),
                notAMac.getMessage());
    }

    /** The paravirtual GPU of macOS VMs reports Apple5, without the SIMD-group reductions the kernels use. */
    @Test
    void devicesBeforeTheApple7FamilyAreRefusedBeforeAnythingIsCompiled() throws Throwable {
        FakeObjcRuntime vm = FakeObjcRuntime.configure("Apple Paravirtual device", 5, null);
        MetalException e = assertThrows(MetalException.class, vm::openDevice);
        assertEquals(
                "opening the Metal device: Apple Paravirtual device is of GPU family Apple5; the kernels need Apple7"
                        + " (M1) or later for their SIMD-group reductions (a macOS virtual machine's paravirtual GPU lacks them:"
                        + " run Glimmer on the Mac itself)",
                e.getMessage());
        assertEquals(List.of(), starting(vm.log(), "newLibraryWithSource"));
        assertClean(vm);

        FakeObjcRuntime none = FakeObjcRuntime.configure("Fake Intel GPU", 0, null);
        assertTrue(assertThrows(MetalException.class, none::openDevice)
                .getMessage()
                .contains("is of no Apple GPU family"));
        assertClean(none);
    }

    /**
     * Metal's API validation (MTL_DEBUG_LAYER=1) aborts on the empty-grid dispatches of the M1/M2 warm-up, without
     * which their drivers crash on an indirect command buffer: an M1 under validation encodes each step directly.
     */
    @Test
    void withApiValidationOnAnM1EncodesDirectly() throws Throwable {
        assertTrue(MetalDevice.apiValidation(Map.of("MTL_DEBUG_LAYER", "1")));
        assertFalse(MetalDevice.apiValidation(Map.of("MTL_DEBUG_LAYER", "0")));
        assertFalse(MetalDevice.apiValidation(Map.of()));

        FakeObjcRuntime fake = FakeObjcRuntime.configure("Fake Apple M1", 7, null);
        try (GlmModel model = GlmModel.open(Oracle.model("tiny-q4_0"));
                MetalDevice device = MetalDevice.open(fake.runtime(), true)) {
            assertEquals(StepEncoder.Mode.DIRECT, device.mode());
            assertEquals("Fake Apple M1 (Apple7, DIRECT, API validation on)", device.describe());
            try (CommandListPool pool = pool(device, model, 1, 8);
                    SequencePool.Sequence decoder = pool.open()) {
                pool.prompt(decoder, new int[] {5}, 0, 1, LOGITS);
            }
        }
        List<String> log = fake.log();
        assertClean(fake);
        assertEquals(List.of(), starting(log, "dispatchThreadgroups:threadsPerThreadgroup: 0x0x0"));
        assertEquals(List.of(), starting(log, "newIndirectCommandBuffer"));
        assertEquals(List.of(), starting(log, "executeCommandsInBuffer"));
    }

    /** A pipeline may allow fewer threads than the dispatch uses (register pressure): caught before the GPU sees it. */
    @Test
    void aDispatchBeyondItsPipelinesLimitsFailsTheEncodingNamingTheKernel() throws Throwable {
        FakeObjcRuntime fake =
                FakeObjcRuntime.configure("Fake Apple M1", 7, null).limiting("mla_attention", 192, 0);
        try (GlmModel model = GlmModel.open(Oracle.model("tiny-q4_0"));
                MetalDevice device = fake.openDevice()) {
            MetalException e = assertThrows(MetalException.class, () -> pool(device, model, 1, 8));
            assertEquals(
                    "encoding the command lists: kernel mla_attention is dispatched with 256 threads per threadgroup,"
                            + " but its pipeline allows at most 192 on this GPU",
                    e.getMessage());
        }
        assertEquals(List.of(), starting(fake.log(), "newIndirectCommandBuffer"), "nothing encoded");
        assertClean(fake);

        FakeObjcRuntime statics =
                FakeObjcRuntime.configure("Fake Apple M1", 7, null).limiting("argmax", 1024, 32_760);
        try (GlmModel model = GlmModel.open(Oracle.model("tiny-q4_0"));
                MetalDevice device = statics.openDevice()) {
            MetalException e = assertThrows(MetalException.class, () -> pool(device, model, 1, 8));
            assertTrue(
                    e.getMessage()
                            .matches("encoding the command lists: kernel argmax needs \\d+ bytes of threadgroup"
                                    + " memory \\(32760 of them static\\), but this GPU has 32768"),
                    e.getMessage());
        }
        assertClean(statics);
    }

    /**
     * Metal answering nil at any point on the way from the device to a decoded token: the failure names its
     * step, and every object made before it is released (the device, the queue, pipelines, buffers, an indirect
     * command buffer encoded part-way).
     */
    @ParameterizedTest
    @CsvSource({
        "MTLCreateSystemDefaultDevice, 1, DEVICE",
        "newCommandQueue, 1, DEVICE",
        "newLibraryWithSource:options:error:, 1, COMPILING",
        "newComputePipelineStateWithDescriptor:options:reflection:error:, 3, PIPELINES",
        "newBufferWithBytesNoCopy:length:options:deallocator:, 1, BUFFERS",
        "newBufferWithLength:options:, 4, BUFFERS",
        "newResidencySetWithDescriptor:error:, 1, BUFFERS",
        "indirectComputeCommandAtIndex:, 5, ENCODING",
        "newIndirectCommandBufferWithDescriptor:maxCommandCount:options:, 2, ENCODING",
        "commandBuffer, 1, RUNNING"
    })
    void aFailureAnywhereNamesItsStepAndReleasesEverything(String selector, int nth, MetalException.Step step)
            throws Throwable {
        FakeObjcRuntime fake = FakeObjcRuntime.configure("Fake Apple M1", 7, null)
                .withResidencySets()
                .failing(selector, nth);
        MetalException e = assertThrows(MetalException.class, () -> {
            try (GlmModel model = GlmModel.open(Oracle.model("tiny-q4_0"));
                    MetalDevice device = fake.openDevice();
                    CommandListPool pool = pool(device, model, 1, 8);
                    SequencePool.Sequence decoder = pool.open()) {
                pool.prompt(decoder, new int[] {5}, 0, 1, LOGITS);
            }
        });
        assertEquals(Optional.of(step), e.step(), e.getMessage());
        assertTrue(fake.log().contains("FAILED " + selector + " (call " + nth + ")"), "the failure was injected");
        assertClean(fake);
    }

    /** {@code slots} sequences of {@code capacity} positions of {@code model} on {@code device}, as MetalChoice makes them. */
    private static CommandListPool pool(MetalDevice device, GlmModel model, int slots, int capacity) {
        return new CommandListPool(model, new MetalIcbRunner(device, model), slots, capacity, Geometry.PROMPT_TOKENS);
    }

    /** The KV buffer row of {@code sequence}'s position 0: its slot's first. */
    private static int kvRow(SequencePool.Sequence sequence, int capacity) {
        return ((SequenceSlots.Slot) sequence).index() * capacity;
    }
}
