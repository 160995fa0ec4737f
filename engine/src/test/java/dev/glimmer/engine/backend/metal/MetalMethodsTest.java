package dev.glimmer.engine.backend.metal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.lang.foreign.AddressLayout;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * The method table against Apple's declarations: every method the backend sends, written down here
 * as Foundation's and Metal's headers and documentation declare it, is parsed and its C types mapped
 * to layouts by the arm64 macOS ABI, and must equal the table's entry. A selector sent with the
 * wrong argument types would corrupt registers on the Mac; this is where it is caught on Linux.
 */
class MetalMethodsTest {

    /** The Objective-C declarations (Foundation/NSObject.h, NSString.h, NSError.h; Metal/*.h). */
    private static final List<String> DECLARATIONS = List.of(
            // NSObject, NSString, NSError
            "+ (instancetype)new",
            "- (oneway void)release",
            "+ (instancetype)stringWithUTF8String:(const char *)nullTerminatedCString",
            "- (const char *)UTF8String",
            "- (NSString *)localizedDescription",
            "- (BOOL)respondsToSelector:(SEL)aSelector",
            // MTLDevice
            "- (NSString *)name",
            "- (BOOL)supportsFamily:(MTLGPUFamily)gpuFamily",
            "- (NSUInteger)maxBufferLength",
            "- (NSUInteger)maxThreadgroupMemoryLength",
            "- (uint64_t)recommendedMaxWorkingSetSize",
            "- (id<MTLCommandQueue>)newCommandQueue",
            "- (id<MTLBuffer>)newBufferWithLength:(NSUInteger)length options:(MTLResourceOptions)options",
            "- (id<MTLBuffer>)newBufferWithBytesNoCopy:(void *)pointer length:(NSUInteger)length "
                    + "options:(MTLResourceOptions)options deallocator:(void (^)(void *pointer, NSUInteger length))deallocator",
            "- (id<MTLLibrary>)newLibraryWithSource:(NSString *)source options:(MTLCompileOptions *)options "
                    + "error:(NSError **)error",
            "- (id<MTLComputePipelineState>)newComputePipelineStateWithDescriptor:(MTLComputePipelineDescriptor *)descriptor "
                    + "options:(MTLPipelineOption)options reflection:(MTLAutoreleasedComputePipelineReflection *)reflection "
                    + "error:(NSError **)error",
            "- (id<MTLIndirectCommandBuffer>)newIndirectCommandBufferWithDescriptor:(MTLIndirectCommandBufferDescriptor *)descriptor "
                    + "maxCommandCount:(NSUInteger)maxCount options:(MTLResourceOptions)options",
            "- (id<MTLResidencySet>)newResidencySetWithDescriptor:(MTLResidencySetDescriptor *)desc error:(NSError **)error",
            // MTLResidencySetDescriptor (property setter), MTLResidencySet
            "- (void)setInitialCapacity:(NSUInteger)initialCapacity",
            "- (void)addAllocation:(id<MTLAllocation>)allocation",
            "- (void)requestResidency",
            "- (void)endResidency",
            // MTLCompileOptions (property setter), MTLComputePipelineState (properties)
            "- (void)setFastMathEnabled:(BOOL)fastMathEnabled",
            "- (NSUInteger)maxTotalThreadsPerThreadgroup",
            "- (NSUInteger)staticThreadgroupMemoryLength",
            // MTLBuffer, MTLLibrary
            "- (void *)contents",
            "- (id<MTLFunction>)newFunctionWithName:(NSString *)functionName",
            // MTLComputePipelineDescriptor (property setters)
            "- (void)setComputeFunction:(id<MTLFunction>)computeFunction",
            "- (void)setSupportIndirectCommandBuffers:(BOOL)supportIndirectCommandBuffers",
            // MTLIndirectCommandBufferDescriptor (property setters)
            "- (void)setCommandTypes:(MTLIndirectCommandType)commandTypes",
            "- (void)setInheritPipelineState:(BOOL)inheritPipelineState",
            "- (void)setInheritBuffers:(BOOL)inheritBuffers",
            "- (void)setMaxKernelBufferBindCount:(NSUInteger)maxKernelBufferBindCount",
            // MTLIndirectCommandBuffer, MTLIndirectComputeCommand
            "- (id<MTLIndirectComputeCommand>)indirectComputeCommandAtIndex:(NSUInteger)commandIndex",
            "- (void)setComputePipelineState:(id<MTLComputePipelineState>)pipelineState",
            "- (void)setKernelBuffer:(id<MTLBuffer>)buffer offset:(NSUInteger)offset atIndex:(NSUInteger)index",
            "- (void)setThreadgroupMemoryLength:(NSUInteger)length atIndex:(NSUInteger)index",
            "- (void)concurrentDispatchThreadgroups:(MTLSize)threadgroupsPerGrid threadsPerThreadgroup:(MTLSize)threadsPerThreadgroup",
            "- (void)setBarrier",
            // MTLCommandQueue, MTLCommandBuffer
            "- (id<MTLCommandBuffer>)commandBuffer",
            "- (void)addResidencySet:(id<MTLResidencySet>)residencySet",
            "- (void)removeResidencySet:(id<MTLResidencySet>)residencySet",
            "- (id<MTLComputeCommandEncoder>)computeCommandEncoder",
            "- (void)commit",
            "- (void)waitUntilCompleted",
            "- (MTLCommandBufferStatus)status",
            "- (NSError *)error",
            // MTLComputeCommandEncoder
            "- (void)setBuffer:(id<MTLBuffer>)buffer offset:(NSUInteger)offset atIndex:(NSUInteger)index",
            "- (void)dispatchThreadgroups:(MTLSize)threadgroupsPerGrid threadsPerThreadgroup:(MTLSize)threadsPerThreadgroup",
            "- (void)useResources:(const id<MTLResource> [])resources count:(NSUInteger)count usage:(MTLResourceUsage)usage",
            "- (void)executeCommandsInBuffer:(id<MTLIndirectCommandBuffer>)indirectCommandBuffer withRange:(NSRange)executionRange",
            "- (void)endEncoding");

    /**
     * The C types of those declarations on arm64 macOS: NSUInteger/NSInteger are 64-bit; Metal's
     * enums and option sets used here are declared {@code NS_ENUM(NSUInteger, …)} /
     * {@code NS_OPTIONS(NSUInteger, …)}, except MTLGPUFamily ({@code NS_ENUM(NSInteger, …)}); BOOL is
     * {@code bool}; MTLSize is three NSUIntegers, NSRange two.
     */
    private static String cType(String objcType) {
        String t = objcType.replaceAll("\\s+", " ").trim();
        return switch (t) {
            case "void", "oneway void" -> "void";
            case "NSUInteger",
                    "NSInteger",
                    "uint64_t",
                    "MTLResourceOptions",
                    "MTLPipelineOption",
                    "MTLIndirectCommandType",
                    "MTLResourceUsage",
                    "MTLCommandBufferStatus",
                    "MTLGPUFamily" -> "i64";
            case "BOOL" -> "bool";
            case "MTLSize" -> "{i64,i64,i64}";
            case "NSRange" -> "{i64,i64}";
            default -> {
                // Objects (id, id<P>, instancetype, C *), selectors, C pointers, arrays of ids and blocks are all one
                // pointer.
                if (t.equals("id")
                        || t.equals("instancetype")
                        || t.equals("SEL")
                        || t.startsWith("id<")
                        || t.contains("*")
                        || t.contains("[]")
                        || t.contains("(^)")) {
                    yield "ptr";
                }
                throw new IllegalArgumentException("no ABI mapping for Objective-C type '" + t + "'");
            }
        };
    }

    /** The same notation for a layout of the table. */
    private static String layout(MemoryLayout l) {
        if (l instanceof AddressLayout) {
            return "ptr";
        }
        if (l instanceof StructLayout s) {
            return s.memberLayouts().stream().map(MetalMethodsTest::layout).collect(Collectors.joining(",", "{", "}"));
        }
        if (l.withoutName().equals(ValueLayout.JAVA_LONG)) {
            return "i64";
        }
        if (l.withoutName().equals(ValueLayout.JAVA_BOOLEAN)) {
            return "bool";
        }
        throw new IllegalArgumentException("unexpected layout " + l);
    }

    private record Declared(String selector, String returns, List<String> args) {}

    private static final Pattern HEAD = Pattern.compile("^[+-]\\s*\\(([^)]*)\\)\\s*(\\w+)(.*)$");
    private static final Pattern PART = Pattern.compile("\\s*(\\w*):\\((.*?)\\)(\\w+)");

    /** Parses {@code - (ret)part:(type)name part:(type)name}; types may hold one nested parenthesis (blocks). */
    private static Declared parse(String declaration) {
        Matcher head = HEAD.matcher(declaration);
        if (!head.matches()) {
            throw new IllegalArgumentException("not a method declaration: " + declaration);
        }
        String returns = cType(head.group(1));
        String first = head.group(2);
        String rest = head.group(3);
        if (rest.isEmpty()) {
            return new Declared(first, returns, List.of());
        }
        StringBuilder selector = new StringBuilder();
        List<String> args = new ArrayList<>();
        String text = first + rest;
        int i = 0;
        while (i < text.length()) {
            while (i < text.length() && text.charAt(i) == ' ') {
                i++;
            }
            int colon = text.indexOf(':', i);
            selector.append(text, i, colon + 1);
            int open = colon + 1;
            int depth = 0;
            int close = open;
            for (; close < text.length(); close++) {
                char c = text.charAt(close);
                if (c == '(') {
                    depth++;
                } else if (c == ')' && --depth == 0) {
                    break;
                }
            }
            args.add(cType(text.substring(open + 1, close)));
            i = close + 1;
            while (i < text.length() && Character.isLetterOrDigit(text.charAt(i))) {
                i++; // the parameter name
            }
        }
        return new Declared(selector.toString(), returns, args);
    }

    @Test
    void everyMethodInTheTableHasApplesArgumentAndReturnTypes() {
        Map<String, Declared> declared = new LinkedHashMap<>();
        for (String d : DECLARATIONS) {
            Declared p = parse(d);
            declared.put(p.selector(), p);
        }
        assertEquals(
                new TreeSet<>(declared.keySet()),
                MetalMethods.ALL.stream().map(ObjcMethod::selector).collect(Collectors.toCollection(TreeSet::new)),
                "the table and the declarations name the same selectors");
        for (ObjcMethod m : MetalMethods.ALL) {
            Declared d = declared.get(m.selector());
            assertEquals(
                    d.returns(), m.returns().map(MetalMethodsTest::layout).orElse("void"), m.selector() + " result");
            assertEquals(
                    d.args(), m.args().stream().map(MetalMethodsTest::layout).toList(), m.selector() + " arguments");
        }
    }

    @Test
    void theParserReadsBlocksArraysAndStructs() {
        Declared d = parse(DECLARATIONS.stream()
                .filter(s -> s.contains("NoCopy"))
                .findFirst()
                .orElseThrow());
        assertEquals(
                new Declared(
                        "newBufferWithBytesNoCopy:length:options:deallocator:",
                        "ptr",
                        List.of("ptr", "i64", "i64", "ptr")),
                d);
        assertEquals(
                new Declared("useResources:count:usage:", "void", List.of("ptr", "i64", "i64")),
                parse(
                        "- (void)useResources:(const id<MTLResource> [])resources count:(NSUInteger)count usage:(MTLResourceUsage)usage"));
        assertEquals(
                new Declared("executeCommandsInBuffer:withRange:", "void", List.of("ptr", "{i64,i64}")),
                parse("- (void)executeCommandsInBuffer:(id<MTLIndirectCommandBuffer>)b withRange:(NSRange)r"));
        assertThrows(IllegalArgumentException.class, () -> parse("- (void)setFoo:(MTLUnknownType)x"));
    }

    @Test
    void messagesAreSentWithReceiverAndSelectorFirstAndNeverVariadic() {
        FunctionDescriptor d = MetalMethods.SET_KERNEL_BUFFER.descriptor();
        assertEquals(
                FunctionDescriptor.ofVoid(
                        ValueLayout.ADDRESS,
                        ValueLayout.ADDRESS,
                        ValueLayout.ADDRESS,
                        ValueLayout.JAVA_LONG,
                        ValueLayout.JAVA_LONG),
                d);
        assertEquals(
                FunctionDescriptor.of(
                        ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG),
                MetalMethods.INDIRECT_COMPUTE_COMMAND.descriptor());
        assertEquals(24, MetalMethods.MTL_SIZE.byteSize());
        assertEquals(16, MetalMethods.NS_RANGE.byteSize());
    }

    @Test
    void aMethodMustHaveOneLayoutPerColon() {
        assertThrows(
                IllegalArgumentException.class,
                () -> ObjcMethod.ofVoid("setBuffer:offset:atIndex:", ValueLayout.ADDRESS));
    }
}
