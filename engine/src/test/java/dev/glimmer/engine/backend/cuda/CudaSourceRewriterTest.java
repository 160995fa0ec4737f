package dev.glimmer.engine.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.kernels.KernelLibrary;
import dev.glimmer.kernels.KernelParser;
import dev.glimmer.kernels.KernelSignature;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The CUDA source generated from the project's kernels, checked as text (CI has no GPU; the GPU
 * tests compile it with NVRTC and run it): one wrapper per kernel with the right parameters, no
 * MSL-only spelling left, every helper a device function, builtins mapped to CUDA's thread ids.
 */
class CudaSourceRewriterTest {

    private static final KernelLibrary LIBRARY = KernelLibrary.load();
    private static final String SOURCE = CudaSourceRewriter.rewrite(LIBRARY);
    /** The part after the prelude: the rewritten .metal files and the wrappers. */
    private static final String REWRITTEN =
            SOURCE.substring(KernelLibrary.resource(CudaSourceRewriter.PRELUDE).length());

    @Test
    void everyKernelHasAGlobalWrapperWithOnePointerPerBufferAndOneOffsetPerThreadgroupMemory() {
        assertFalse(LIBRARY.kernels().isEmpty());
        for (KernelSignature k : LIBRARY.kernels()) {
            Matcher m = Pattern.compile("extern \"C\" __global__ void (?:__launch_bounds__\\([^)]*\\) )?" + k.name()
                            + "\\(([^)]*)\\)")
                    .matcher(SOURCE);
            assertTrue(m.find(), "no wrapper for " + k.name());
            String params = m.group(1);
            for (int i = 0; i < k.bufferCount(); i++) {
                assertTrue(params.contains("unsigned char * b" + i), k.name() + " lacks buffer " + i + ": " + params);
            }
            assertEquals(
                    k.bufferCount() + k.threadgroupMemoryCount(),
                    params.isBlank() ? 0 : params.split(",").length,
                    k.name() + ": " + params);
            assertTrue(
                    SOURCE.contains("static __device__ __forceinline__ void " + CudaSourceRewriter.BODY_PREFIX
                            + k.name() + "("),
                    k.name() + "'s body is not a device function");
            assertFalse(m.find(), "two wrappers for " + k.name());
        }
    }

    @Test
    void noMslOnlySpellingRemains() {
        assertFalse(REWRITTEN.contains("[["), "an attribute is left");
        assertFalse(Pattern.compile("\\bkernel\\s+void\\b").matcher(REWRITTEN).find(), "a kernel keyword is left");
        assertFalse(
                MslTokens.lex(REWRITTEN).stream()
                        .anyMatch(t -> t.kind() == MslTokens.Kind.IDENTIFIER
                                && CudaSourceRewriter.ADDRESS_SPACES.contains(t.text())),
                "an address-space word is left");
        assertFalse(SOURCE.contains("metal_stdlib") || SOURCE.contains("using namespace metal"));
        assertFalse(SOURCE.contains("#include"), "NVRTC has no system headers: the source must stand alone");
    }

    @Test
    void everyHelperFunctionIsADeviceFunction() {
        // the definitions in the .metal files: free helpers, struct members (static or const), templates
        for (String helper : List.of(
                "row_bytes",
                "load_half",
                "scale_min_k4",
                "load_consecutive",
                "mv_rows_of",
                "mv_rows",
                "threadgroup_sum",
                "rms_scale",
                "rope_pairs",
                "get",
                "index",
                "load",
                "dot",
                "dequant",
                "chunk")) {
            assertTrue(
                    Pattern.compile("__device__ " + helper + "\\(")
                            .matcher(REWRITTEN)
                            .find(),
                    helper + " is not annotated");
        }
        // calls and control statements are left alone
        assertFalse(REWRITTEN.contains("__device__ if")
                || REWRITTEN.contains("__device__ for")
                || REWRITTEN.contains("__device__ switch")
                || REWRITTEN.contains("= __device__"));
    }

    @Test
    void helperAnnotationFindsDefinitionsOnly() {
        String in = "static inline uint f(uint a) { if (a) { return g(a); } for (;;) {} }\n"
                + "struct S { float get(uint i) const { return 0; } template <typename X> static void h(X x) {} };\n"
                + "S s = {1};\n";
        String out = rewrite(in);
        assertEquals(
                "static inline uint __device__ f(uint a) { if (a) { return g(a); } for (;;) {} }\n"
                        + "struct S { float __device__ get(uint i) const { return 0; } template <typename X> static void __device__ h(X x) {} };\n"
                        + "S s = {1};\n",
                out);
    }

    @Test
    void theKernelsOfWideThreadgroupsGetLaunchBoundsAndTheOthersNone() {
        // without the bound NVCC may use more registers than 1024 threads of a block can have
        for (String wide : new String[] {"moe_route"}) {
            assertTrue(
                    SOURCE.contains(
                            "extern \"C\" __global__ void __launch_bounds__(GLIMMER_HEAD_SIMDGROUPS * GLIMMER_SIMD_WIDTH) "
                                    + wide + "("),
                    wide);
        }
        // mla_attention declares its 256 threads for Metal (Apple's audit): on CUDA that caps nothing, 65,536 registers
        // /
        // 256 threads is more than the 255 a thread may have, so it keeps its register budget
        assertTrue(
                SOURCE.contains(
                        "extern \"C\" __global__ void __launch_bounds__(GLIMMER_WIDE_SIMDGROUPS * GLIMMER_SIMD_WIDTH)"
                                + " mla_attention("),
                "mla_attention keeps its register budget");
        assertTrue(SOURCE.contains("extern \"C\" __global__ void moe_router("), "moe_router has the mat-vec layout");
    }

    @Test
    void builtinsMapToTheBlockAndWarpOfTheThread() {
        String w = CudaSourceRewriter.wrapper(KernelParser.kernels("""
                kernel void k(device float * y [[buffer(0)]], constant A & a [[buffer(1)]], threadgroup float * s TG_MEM(0),
                              uint3 tgpig [[threadgroup_position_in_grid]], ushort tiitg [[thread_index_in_threadgroup]],
                              ushort tiisg [[thread_index_in_simdgroup]], ushort sgitg [[simdgroup_index_in_threadgroup]]) {}
                """).getFirst(), null);
        assertTrue(
                w.startsWith("extern \"C\" __global__ void k(unsigned char * b0, unsigned char * b1, uint tg0) {"), w);
        assertTrue(w.contains("(float *) b0"), w);
        assertTrue(w.contains("*(A *) b1"), w);
        assertTrue(w.contains("(float *) ((unsigned char *) glimmer_threadgroup_memory + tg0)"), w);
        assertTrue(w.contains("(uint3) glimmer_uint3(blockIdx.x, blockIdx.y, blockIdx.z)"), w);
        assertTrue(w.contains("(ushort) glimmer_tid"), w);
        assertTrue(w.contains("(ushort) (glimmer_tid % 32)"), w);
        assertTrue(w.contains("(ushort) (glimmer_tid / 32)"), w);
    }

    @Test
    void anUnmappedBuiltinIsRefusedWithTheKernelNamed() {
        KernelSignature k = KernelParser.kernels("kernel void odd(uint q [[quad_lane_id]]) {}")
                .getFirst();
        IllegalArgumentException e =
                assertThrows(IllegalArgumentException.class, () -> CudaSourceRewriter.wrapper(k, null));
        assertTrue(e.getMessage().contains("odd") && e.getMessage().contains("quad_lane_id"), e.getMessage());
    }

    /** Qualifiers go; names that contain or spell such a word stay, as do members and string contents. */
    @Test
    void onlyQualifierTokensAreDropped() {
        String in = "struct S { float device; uint thread_count; };\n"
                + "float f(device const S & s, threadgroup float * threadgroup_sum, constant uint & n) {\n"
                + "    return s.device + threadgroup_sum[n] + (float) ((device const S *) &s)->thread_count; }\n";
        assertEquals(
                "struct S { float device; uint thread_count; };\n"
                        + "float __device__ f(const S & s, float * threadgroup_sum, uint & n) {\n"
                        + "    return s.device + threadgroup_sum[n] + (float) ((const S *) &s)->thread_count; }\n",
                rewrite(in));
    }

    /**
     * Each kernel source alone: the rewrite keeps its line count (NVRTC's messages name the .metal line) and
     * every identifier outside attributes, apart from the qualifiers, the {@code kernel} keyword and the kernel
     * names (which become {@code glimmer_body_NAME}); it only adds {@code __device__}, {@code static},
     * {@code __forceinline__} and the body names.
     */
    @Test
    void everyKernelSourceKeepsItsLinesAndItsOtherIdentifiers() {
        Set<String> kernels = new HashSet<>();
        LIBRARY.kernels().forEach(k -> kernels.add(k.name()));
        Set<String> changed = new HashSet<>(CudaSourceRewriter.ADDRESS_SPACES);
        changed.addAll(kernels);
        changed.addAll(List.of("kernel", "static", "__device__", "__forceinline__"));
        for (KernelLibrary.SourceFile f : LIBRARY.files()) {
            String out = CudaSourceRewriter.rewriteTokens(MslTokens.lex(f.text()), kernels, new HashMap<>());
            assertEquals(f.text().lines().count(), out.lines().count(), f.name() + ": lines");
            Map<String, Integer> before = identifiers(f.text(), changed);
            Map<String, Integer> after = identifiers(out, changed);
            after.keySet().removeIf(name -> name.startsWith(CudaSourceRewriter.BODY_PREFIX));
            assertEquals(before, after, f.name() + ": identifiers");
            assertFalse(before.isEmpty(), f.name());
        }
    }

    /** How often each identifier outside comments and {@code [[...]]} attributes occurs, except {@code ignored}. */
    private static Map<String, Integer> identifiers(String source, Set<String> ignored) {
        Map<String, Integer> counts = new TreeMap<>();
        List<MslTokens.Token> tokens = MslTokens.lex(source).stream()
                .filter(t -> t.kind() != MslTokens.Kind.SPACE && t.kind() != MslTokens.Kind.COMMENT)
                .toList();
        boolean inAttribute = false;
        for (int i = 0; i < tokens.size(); i++) {
            MslTokens.Token t = tokens.get(i);
            boolean pair = i + 1 < tokens.size() && tokens.get(i + 1).is(t.text());
            if (!inAttribute && t.is("[") && pair) {
                inAttribute = true;
                i++;
            } else if (inAttribute && t.is("]") && pair) {
                inAttribute = false;
                i++;
            } else if (!inAttribute && t.kind() == MslTokens.Kind.IDENTIFIER && !ignored.contains(t.text())) {
                counts.merge(t.text(), 1, Integer::sum);
            }
        }
        return counts;
    }

    private static String rewrite(String source) {
        return CudaSourceRewriter.rewriteTokens(MslTokens.lex(source), Set.of(), new HashMap<>());
    }

    @Test
    void commentsGoButLineNumbersStay() {
        String in = "a /* x\ny { */ b // c {\nd\n";
        String out = rewrite(in);
        assertEquals(in.lines().count(), out.lines().count());
        assertFalse(out.contains("{"));
        assertTrue(out.contains("a") && out.contains("b") && out.contains("d"));
    }
}
