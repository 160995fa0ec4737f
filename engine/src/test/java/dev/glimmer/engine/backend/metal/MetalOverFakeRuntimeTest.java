package dev.glimmer.engine.backend.metal;

import dev.glimmer.engine.model.GlmModel;
import dev.glimmer.engine.model.Oracle;
import dev.glimmer.engine.backend.emulated.DecodeModels;
import dev.glimmer.kernels.Geometry;
import dev.glimmer.kernels.KernelLibrary;
import dev.glimmer.kernels.Size3;
import dev.glimmer.kernels.decode.BufferSpec;
import dev.glimmer.kernels.decode.CommandList;
import dev.glimmer.kernels.decode.DecodeCommandListBuilder;
import dev.glimmer.kernels.decode.Dispatch;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.DisabledOnOs;
import org.junit.jupiter.api.condition.OS;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
        FakeObjcRuntime fake = FakeObjcRuntime.configure("Fake Apple M1", false, null).withResidencySets();
        KernelLibrary kernels = KernelLibrary.load();
        CommandList list;
        CommandList prompt;
        try (GlmModel model = GlmModel.open(Oracle.model("tiny-q4_0"));
             MetalDevice device = MetalDevice.open(fake.runtime())) {
            assertEquals("Fake Apple M1", device.name());
            assertEquals(StepEncoder.Mode.INDIRECT_WITH_EMPTY_DISPATCHES, device.mode());
            try (MetalDecoder decoder = new MetalDecoder(device, model, 8)) {
                list = decoder.commandList();
                prompt = DecodeCommandListBuilder.build(DecodeModels.of(model.file(), model.config()), 8,
                        Geometry.PROMPT_TOKENS);
                // a prompt of TOKENS (the prompt command list), then one decode step
                float[] logits = decoder.forward(new int[] {5, 9}, 0, TOKENS);
                assertEquals(model.vocabSize(), logits.length);
                assertEquals(model.vocabSize(), decoder.forward(new int[] {7}, 0, 1).length);
                assertEquals(TOKENS + 1, decoder.position());
            }
        }
        List<String> log = fake.log();
        assertClean(fake);

        // Compilation: the whole library source, every kernel as an ICB-capable pipeline.
        int sourceBytes = kernels.metalSource().getBytes(StandardCharsets.UTF_8).length;
        assertEquals(List.of("newLibraryWithSource:options:error: source " + sourceBytes + " bytes, options (nil), error out given"),
                starting(log, "newLibraryWithSource"));
        assertEquals(kernels.kernels().stream().map(k -> "newFunctionWithName: " + k.name()).toList(),
                starting(log, "newFunctionWithName"));
        assertEquals(kernels.kernels().size(), starting(log, "setSupportIndirectCommandBuffers: 1").size());

        // Two indirect command buffers, the decode step's and the prompt list's: their descriptors, then each dispatch.
        List<String> descriptors = new ArrayList<>();
        List<String> icbs = new ArrayList<>();
        List<String> dispatches = new ArrayList<>();
        List<String> bindings = new ArrayList<>();
        int barriers = 0;
        for (CommandList l : List.of(list, prompt)) {
            int maxBindings = l.dispatches().stream().mapToInt(d -> d.bindings().size()).max().orElseThrow();
            descriptors.addAll(List.of("setCommandTypes: 32", "setMaxKernelBufferBindCount: " + maxBindings));
            icbs.add("newIndirectCommandBufferWithDescriptor:maxCommandCount:options: MTLIndirectCommandBufferDescriptor "
                    + l.dispatches().size() + " 0");
            for (Dispatch d : l.dispatches()) {
                dispatches.add("concurrentDispatchThreadgroups:threadsPerThreadgroup: " + size(d.grid()) + " " + size(d.threads()));
                for (Dispatch.Binding b : d.bindings()) {
                    bindings.add("setKernelBuffer:offset:atIndex: MTLBuffer " + b.offset() + " " + b.index());
                }
            }
            barriers += l.dispatches().size() - 1;
        }
        assertEquals(descriptors, log.stream()
                .filter(l -> l.startsWith("setCommandTypes") || l.startsWith("setMaxKernelBufferBindCount")).toList());
        assertEquals(List.of("setInheritPipelineState: 0", "setInheritBuffers: 0", "setInheritPipelineState: 0",
                "setInheritBuffers: 0"), starting(log, "setInherit"));
        assertEquals(icbs, starting(log, "newIndirectCommandBuffer"));
        assertEquals(dispatches, starting(log, "concurrentDispatch"));
        assertEquals(bindings, starting(log, "setKernelBuffer"));
        assertEquals(barriers, starting(log, "setBarrier").size());

        // Buffers: the weights wrapped in place, page-aligned, once; the KV cache shared by the two lists; the rest
        // allocated shared.
        long page = fake.runtime().pageSize();
        List<String> wrapped = starting(log, "newBufferWithBytesNoCopy");
        int weights = (int) list.buffers().stream().filter(b -> b.kind() == BufferSpec.Kind.WEIGHTS).count();
        assertEquals(weights, wrapped.size());
        for (String w : wrapped) {
            String[] f = w.split(" ");
            assertEquals(0, Long.decode(f[1]) % page, w);
            assertEquals(0, Long.parseLong(f[2]) % page, w);
            assertEquals("0", f[3], w);
            assertEquals("(nil)", f[4], w);
        }
        long promptOwn = prompt.buffers().stream()
                .filter(b -> b.kind() != BufferSpec.Kind.WEIGHTS && b.kind() != BufferSpec.Kind.KV_CACHE).count();
        assertEquals(list.buffers().size() - weights + promptOwn, starting(log, "newBufferWithLength:options:").size());

        // Each run (the prompt batch, then the decode step): the M1 workaround, residency, the whole range.
        Set<String> pipelines = new LinkedHashSet<>();
        list.dispatches().forEach(d -> pipelines.add(d.kernel()));
        Set<String> promptPipelines = new LinkedHashSet<>();
        prompt.dispatches().forEach(d -> promptPipelines.add(d.kernel()));
        assertEquals(pipelines.size() + promptPipelines.size(),
                starting(log, "dispatchThreadgroups:threadsPerThreadgroup: 0x0x0 0x0x0").size());
        assertEquals(List.of("executeCommandsInBuffer:withRange: MTLIndirectCommandBuffer 0 " + prompt.dispatches().size(),
                "executeCommandsInBuffer:withRange: MTLIndirectCommandBuffer 0 " + list.dispatches().size()),
                starting(log, "executeCommandsInBuffer"));
        assertEquals(2, starting(log, "useResources:count:usage: " + weights + " (" + weights + " buffers) 1").size());
        int others = list.buffers().size() - weights;
        int promptOthers = prompt.buffers().size() - weights;
        assertEquals(List.of("useResources:count:usage: " + promptOthers + " (" + promptOthers + " buffers) 3",
                "useResources:count:usage: " + others + " (" + others + " buffers) 3"),
                log.stream().filter(l -> l.startsWith("useResources") && l.endsWith(" 3")).toList());
        assertEquals(2, starting(log, "waitUntilCompleted").size());

        // The weights stay resident between tokens: a residency set on the queue, ended on close.
        List<String> residency = log.stream().filter(l -> l.contains("esidency") || l.startsWith("addAllocation")
                || l.equals("commit on MTLResidencySet")).toList();
        List<String> expected = new ArrayList<>(List.of("respondsToSelector: newResidencySetWithDescriptor:error:",
                "new -> owned MTLResidencySetDescriptor", "newResidencySetWithDescriptor:error: MTLResidencySetDescriptor error-out",
                "release MTLResidencySetDescriptor"));
        for (int i = 0; i < weights; i++) {
            expected.add("addAllocation: MTLBuffer on MTLResidencySet");
        }
        expected.addAll(List.of("commit on MTLResidencySet", "requestResidency on MTLResidencySet",
                "addResidencySet: MTLResidencySet on MTLCommandQueue", "removeResidencySet: MTLResidencySet on MTLCommandQueue",
                "endResidency on MTLResidencySet", "release MTLResidencySet"));
        assertEquals(expected, residency);
        assertTrue(log.indexOf("addResidencySet: MTLResidencySet on MTLCommandQueue") < log.indexOf("commandBuffer"),
                "attached before the first step");
    }

    @Test
    void m3AndLaterSkipTheWorkaroundAndVirtualDevicesEncodeDirectly() throws Throwable {
        FakeObjcRuntime m3 = FakeObjcRuntime.configure("Fake Apple M3", true, null);
        try (MetalDevice device = MetalDevice.open(m3.runtime())) {
            assertEquals(StepEncoder.Mode.INDIRECT, device.mode());
        }
        assertClean(m3);

        FakeObjcRuntime vm = FakeObjcRuntime.configure("Apple Paravirtual device", true, null);
        int n;
        try (GlmModel model = GlmModel.open(Oracle.model("tiny-q4_0"));
             MetalDevice device = MetalDevice.open(vm.runtime())) {
            assertEquals(StepEncoder.Mode.DIRECT, device.mode());
            try (MetalDecoder decoder = new MetalDecoder(device, model, 8)) {
                n = decoder.commandList().dispatches().size();
                decoder.forward(new int[] {5}, 0, 1);
            }
        }
        List<String> log = vm.log();
        assertClean(vm);
        assertEquals(List.of(), starting(log, "newIndirectCommandBuffer"));
        assertEquals(n, starting(log, "dispatchThreadgroups:threadsPerThreadgroup:").size());
        assertEquals(List.of(), starting(log, "executeCommandsInBuffer"));
        assertEquals(List.of("respondsToSelector: newResidencySetWithDescriptor:error:"), log.stream()
                .filter(l -> l.contains("esidency")).toList(), "no residency set before macOS 15");
    }

    @Test
    void kernelsThatDoNotCompileAreReportedWithTheKernelAndMetalsMessage() throws Throwable {
        // Line 30 of matvec.metal lies in the body of mat_vec; line 1 is above every kernel.
        String inKernel = "matvec.metal:30:5: error: use of undeclared identifier 'oops'";
        FakeObjcRuntime fake = FakeObjcRuntime.configure("Fake Apple M2", false, inKernel);
        MetalException e = assertThrows(MetalException.class, () -> MetalDevice.open(fake.runtime()));
        assertEquals("the kernels do not compile: kernel mat_vec: " + inKernel, e.getMessage());
        assertClean(fake);

        String outside = "common.metal:1:1: error: unknown type name 'foo'";
        FakeObjcRuntime helper = FakeObjcRuntime.configure("Fake Apple M2", false, outside);
        assertEquals("the kernels do not compile: " + outside,
                assertThrows(MetalException.class, () -> MetalDevice.open(helper.runtime())).getMessage());
        assertClean(helper);
    }
}
