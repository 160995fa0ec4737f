package dev.glimmer.engine.backend.cuda;

import dev.glimmer.kernels.KernelLibrary;
import dev.glimmer.kernels.KernelParam;
import dev.glimmer.kernels.KernelSignature;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Turns the project's {@code .metal} sources into one CUDA C++ translation unit (docs/KERNELS.md §8):
 * our CUDA prelude ({@code cuda_prelude.h}: half, simd_* as warp shuffles, barriers), then the
 * sources with {@code __device__} put on every helper function, the {@code [[...]]} attributes and
 * the address-space words ({@code device}, {@code constant}, ...) dropped and each {@code kernel void NAME(...)} renamed to a device
 * function {@code glimmer_body_NAME}; last, one {@code extern "C" __global__ void NAME(...)} wrapper
 * per kernel that maps the CUDA grid onto MSL's builtins (threadgroup = block, SIMD-group = warp)
 * and takes the kernel's buffers as pointers {@code b0..bN} and its threadgroup memory as byte
 * offsets {@code tg0..tgM} into the launch's dynamic shared memory.
 */
public final class CudaSourceRewriter {

    /** The classpath resource of the prelude. */
    public static final String PRELUDE = "/dev/glimmer/engine/backend/cuda/cuda_prelude.h";
    /** Prefix of the device function a kernel's body becomes. */
    public static final String BODY_PREFIX = "glimmer_body_";

    private static final Pattern KERNEL = Pattern.compile("\\bkernel\\s+void\\s+(\\w+)\\s*\\(");
    private static final Pattern ATTRIBUTE = Pattern.compile("\\[\\[[^\\]]*\\]\\]");
    /**
     * MSL's cap on a kernel's threadgroup size, written before {@code kernel}: it becomes
     * {@code __launch_bounds__}, without which NVCC may give a 1024-thread kernel more registers than a
     * block of 1024 threads can have (the launch then fails with "too many resources requested").
     */
    private static final Pattern MAX_THREADS = Pattern.compile(
            "\\[\\[\\s*max_total_threads_per_threadgroup\\(([^\\]]*)\\)\\s*\\]\\]\\s*kernel\\s+void\\s+(\\w+)\\s*\\(");
    /** MSL's address-space qualifiers: CUDA's generic pointers cover them all. */
    static final Pattern ADDRESS_SPACE = Pattern.compile("\\b(device|constant|thread|threadgroup)\\b\\s*");
    private static final Set<String> NOT_FUNCTIONS = Set.of("if", "for", "while", "switch", "catch", "return", "sizeof",
            "else", "do");

    private CudaSourceRewriter() {
    }

    /** The CUDA source of {@code library}: prelude, rewritten sources, wrappers. */
    public static String rewrite(KernelLibrary library) {
        Set<String> kernels = new HashSet<>();
        for (KernelSignature k : library.kernels()) {
            kernels.add(k.name());
        }
        String text = stripComments(KernelLibrary.concatenate(library.files()));
        Map<String, String> maxThreads = new HashMap<>();
        Matcher bound = MAX_THREADS.matcher(text);
        while (bound.find()) {
            maxThreads.put(bound.group(2), bound.group(1).trim());
        }
        text = annotateHelpers(text, kernels);
        text = ATTRIBUTE.matcher(text).replaceAll("");
        text = ADDRESS_SPACE.matcher(text).replaceAll("");
        text = KERNEL.matcher(text).replaceAll("static __device__ __forceinline__ void " + BODY_PREFIX + "$1(");
        StringBuilder out = new StringBuilder(KernelLibrary.resource(PRELUDE));
        out.append('\n').append(text).append("\n#line 1 \"cuda_wrappers\"\n");
        for (KernelSignature k : library.kernels()) {
            out.append(wrapper(k, maxThreads.get(k.name())));
        }
        return out.toString();
    }

    /** The {@code __global__} wrapper of one kernel; {@code maxThreads} (an expression, or null) caps its block size. */
    static String wrapper(KernelSignature k, String maxThreads) {
        List<String> params = new ArrayList<>();
        for (int i = 0; i < k.bufferCount(); i++) {
            params.add("unsigned char * b" + i);
        }
        for (int i = 0; i < k.threadgroupMemoryCount(); i++) {
            params.add("uint tg" + i);
        }
        List<String> args = new ArrayList<>();
        for (KernelParam p : k.params()) {
            args.add(argument(k.name(), p));
        }
        String bounds = maxThreads == null ? "" : "__launch_bounds__(" + maxThreads + ") ";
        return "extern \"C\" __global__ void " + bounds + k.name() + "(" + String.join(", ", params) + ") {\n"
                + "    const uint glimmer_tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);\n"
                + "    (void) glimmer_tid;\n"
                + "    " + BODY_PREFIX + k.name() + "(" + String.join(",\n        ", args) + ");\n"
                + "}\n";
    }

    private static String argument(String kernel, KernelParam p) {
        String type = ADDRESS_SPACE.matcher(p.type()).replaceAll("");
        return switch (p.binding()) {
            case KernelParam.Buffer b -> p.isReference()
                    ? "*(" + type.substring(0, type.length() - 1).trim() + " *) b" + b.index()
                    : "(" + type + ") b" + b.index();
            case KernelParam.ThreadgroupMemory t ->
                    "(" + type + ") ((unsigned char *) glimmer_threadgroup_memory + tg" + t.index() + ")";
            case KernelParam.Builtin b -> "(" + type + ") " + builtin(kernel, p.name(), b.attribute(), type);
        };
    }

    /** The CUDA expression of an MSL attribute builtin, as a vector when the parameter is one. */
    private static String builtin(String kernel, String name, String attribute, String type) {
        String[] v = switch (attribute) {
            case "threadgroup_position_in_grid" -> new String[] {"blockIdx.x", "blockIdx.y", "blockIdx.z"};
            case "threadgroups_per_grid" -> new String[] {"gridDim.x", "gridDim.y", "gridDim.z"};
            case "thread_position_in_threadgroup" -> new String[] {"threadIdx.x", "threadIdx.y", "threadIdx.z"};
            case "threads_per_threadgroup" -> new String[] {"blockDim.x", "blockDim.y", "blockDim.z"};
            case "thread_position_in_grid" -> new String[] {"(blockIdx.x * blockDim.x + threadIdx.x)",
                    "(blockIdx.y * blockDim.y + threadIdx.y)", "(blockIdx.z * blockDim.z + threadIdx.z)"};
            case "thread_index_in_threadgroup" -> new String[] {"glimmer_tid"};
            case "thread_index_in_simdgroup" -> new String[] {"(glimmer_tid % 32)"};
            case "simdgroup_index_in_threadgroup" -> new String[] {"(glimmer_tid / 32)"};
            case "threads_per_simdgroup" -> new String[] {"32u"};
            case "simdgroups_per_threadgroup" -> new String[] {"((blockDim.x * blockDim.y * blockDim.z + 31) / 32)"};
            default -> throw new IllegalArgumentException("kernel " + kernel + ": parameter " + name
                    + " has the builtin [[" + attribute + "]], which the CUDA rewrite does not map");
        };
        if (type.endsWith("3") && v.length == 3) {
            return "glimmer_uint3(" + v[0] + ", " + v[1] + ", " + v[2] + ")";
        }
        if (type.endsWith("2") && v.length == 3) {
            return "glimmer_uint2(" + v[0] + ", " + v[1] + ")";
        }
        return v[0];
    }

    /**
     * Puts {@code __device__} before the name of every function definition that is not a kernel:
     * a {@code {} preceded by {@code (...)} (and maybe {@code const}) whose name follows a type.
     * CUDA accepts the execution space among the declaration's specifiers.
     */
    static String annotateHelpers(String text, Set<String> kernels) {
        List<Integer> inserts = new ArrayList<>();
        for (int i = text.indexOf('{'); i >= 0; i = text.indexOf('{', i + 1)) {
            int j = skipSpaceBack(text, i - 1);
            if (j >= 4 && text.startsWith("const", j - 4) && !isIdent(text, j - 5)) {
                j = skipSpaceBack(text, j - 5);
            }
            if (j < 0 || text.charAt(j) != ')') {
                continue;
            }
            int open = matchingOpen(text, j);
            if (open < 0) {
                continue;
            }
            int nameEnd = skipSpaceBack(text, open - 1);
            int nameStart = nameEnd;
            while (nameStart >= 0 && isIdent(text, nameStart)) {
                nameStart--;
            }
            String name = text.substring(nameStart + 1, nameEnd + 1);
            if (name.isEmpty() || NOT_FUNCTIONS.contains(name) || kernels.contains(name)
                    || Character.isDigit(name.charAt(0))) {
                continue;
            }
            int before = skipSpaceBack(text, nameStart);
            if (before < 0) {
                continue;
            }
            char c = text.charAt(before);
            if (isIdent(text, before) || c == '*' || c == '&' || c == '>') {
                inserts.add(nameStart + 1);
            }
        }
        StringBuilder sb = new StringBuilder(text);
        for (int k = inserts.size() - 1; k >= 0; k--) {
            sb.insert(inserts.get(k), "__device__ ");
        }
        return sb.toString();
    }

    private static int matchingOpen(String text, int close) {
        int depth = 0;
        for (int k = close; k >= 0; k--) {
            char c = text.charAt(k);
            if (c == ')') {
                depth++;
            } else if (c == '(') {
                depth--;
                if (depth == 0) {
                    return k;
                }
            }
        }
        return -1;
    }

    private static int skipSpaceBack(String text, int i) {
        while (i >= 0 && Character.isWhitespace(text.charAt(i))) {
            i--;
        }
        return i;
    }

    private static boolean isIdent(String text, int i) {
        if (i < 0) {
            return false;
        }
        char c = text.charAt(i);
        return Character.isLetterOrDigit(c) || c == '_';
    }

    /** Comments removed, newlines kept (so {@code #line} numbers stay right and braces in comments are not code). */
    static String stripComments(String s) {
        Matcher block = Pattern.compile("(?s)/\\*.*?\\*/").matcher(s);
        StringBuilder sb = new StringBuilder();
        while (block.find()) {
            block.appendReplacement(sb, Matcher.quoteReplacement(block.group().replaceAll("[^\n]", "")));
        }
        block.appendTail(sb);
        return sb.toString().replaceAll("//[^\n]*", "");
    }
}
