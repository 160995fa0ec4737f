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

/**
 * Turns the project's {@code .metal} sources into one CUDA C++ translation unit (docs/KERNELS.md §8):
 * our CUDA prelude ({@code cuda_prelude.h}: half, simd_* as warp shuffles, barriers), then the
 * sources with {@code __device__} put on every helper function, the {@code [[...]]} attributes and
 * the address-space qualifiers ({@code device}, {@code constant}, ...) dropped and each {@code kernel void NAME(...)}
 * turned into a device function {@code glimmer_body_NAME}; last, one {@code extern "C" __global__ void NAME(...)}
 * wrapper per kernel that maps the CUDA grid onto MSL's builtins (threadgroup = block, SIMD-group = warp)
 * and takes the kernel's buffers as pointers {@code b0..bN} and its threadgroup memory as byte
 * offsets {@code tg0..tgM} into the launch's dynamic shared memory.
 *
 * <p>The sources are rewritten as tokens ({@link MslTokens}), not as text: a qualifier is a whole
 * identifier token (never part of a longer name, a member or a comment), an attribute is a {@code [[ ]]}
 * pair of tokens, and everything not rewritten is copied as it was, line breaks included, so that
 * NVRTC's messages keep the {@code #line} numbers of the .metal files.
 */
public final class CudaSourceRewriter {

    /** The classpath resource of the prelude. */
    public static final String PRELUDE = "/dev/glimmer/engine/backend/cuda/cuda_prelude.h";
    /** Prefix of the device function a kernel's body becomes. */
    public static final String BODY_PREFIX = "glimmer_body_";
    /** MSL's address-space qualifiers: CUDA's generic pointers cover them all. */
    static final Set<String> ADDRESS_SPACES = Set.of("device", "constant", "thread", "threadgroup");
    /**
     * MSL's cap on a kernel's threadgroup size, an attribute before {@code kernel}: it becomes
     * {@code __launch_bounds__}, without which NVCC may give a 1024-thread kernel more registers than a
     * block of 1024 threads can have (the launch then fails with "too many resources requested").
     */
    private static final String MAX_THREADS = "max_total_threads_per_threadgroup";

    private static final Set<String> NOT_FUNCTIONS =
            Set.of("if", "for", "while", "switch", "catch", "return", "sizeof", "else", "do");

    private CudaSourceRewriter() {}

    /** The CUDA source of {@code library}: prelude, rewritten sources, wrappers. */
    public static String rewrite(KernelLibrary library) {
        Set<String> kernels = new HashSet<>();
        for (KernelSignature k : library.kernels()) {
            kernels.add(k.name());
        }
        List<MslTokens.Token> tokens = MslTokens.lex(KernelLibrary.concatenate(library.files()));
        Map<String, String> maxThreads = new HashMap<>();
        StringBuilder out = new StringBuilder(KernelLibrary.resource(PRELUDE));
        out.append('\n').append(rewriteTokens(tokens, kernels, maxThreads)).append("\n#line 1 \"cuda_wrappers\"\n");
        for (KernelSignature k : library.kernels()) {
            out.append(wrapper(k, maxThreads.get(k.name())));
        }
        return out.toString();
    }

    /**
     * The rewritten text of {@code tokens}; the {@code max_total_threads_per_threadgroup} bound of each
     * kernel that has one goes into {@code maxThreads}.
     */
    static String rewriteTokens(List<MslTokens.Token> tokens, Set<String> kernels, Map<String, String> maxThreads) {
        List<MslTokens.Token> t = withoutComments(tokens);
        Set<Integer> helpers = helperNames(t, kernels);
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < t.size(); i++) {
            MslTokens.Token tok = t.get(i);
            if (tok.is("[") && next(t, i, 1).is("[")) {
                int end = attributeEnd(t, i);
                int name = nextSignificant(t, i + 2);
                int kernel = nextSignificant(t, end + 1);
                if (t.get(name).is(MAX_THREADS) && t.get(kernel).is("kernel")) {
                    // [[max_total_threads_per_threadgroup(EXPR)]] kernel void NAME(
                    int open = nextSignificant(t, name + 1);
                    int close = previousSignificant(t, end - 2);
                    maxThreads.put(
                            t.get(nextSignificant(t, nextSignificant(t, kernel + 1) + 1))
                                    .text(),
                            text(t, open + 1, close - 1).trim());
                }
                i = end;
            } else if (isAddressSpace(t, i)) {
                while (i + 1 < t.size() && t.get(i + 1).kind() == MslTokens.Kind.SPACE) {
                    i++;
                }
            } else if (tok.is("kernel") && t.get(nextSignificant(t, i + 1)).is("void")) {
                int name = nextSignificant(t, nextSignificant(t, i + 1) + 1);
                int open = nextSignificant(t, name + 1);
                sb.append("static __device__ __forceinline__ void ")
                        .append(BODY_PREFIX)
                        .append(t.get(name).text())
                        .append('(');
                i = open;
            } else {
                if (helpers.contains(i)) {
                    sb.append("__device__ ");
                }
                sb.append(tok.text());
            }
        }
        return sb.toString();
    }

    /** Comments replaced by their line breaks, so that line numbers stay and braces in comments are not code. */
    private static List<MslTokens.Token> withoutComments(List<MslTokens.Token> tokens) {
        List<MslTokens.Token> out = new ArrayList<>(tokens.size());
        for (MslTokens.Token tok : tokens) {
            if (tok.kind() == MslTokens.Kind.COMMENT) {
                String breaks = tok.text().replaceAll("[^\n]", "");
                if (!breaks.isEmpty()) {
                    out.add(new MslTokens.Token(MslTokens.Kind.SPACE, breaks));
                }
            } else {
                out.add(tok);
            }
        }
        return out;
    }

    /**
     * The token indices of the names of every function definition that is not a kernel: a {@code {}
     * preceded by {@code (...)} (and maybe {@code const}) whose name follows a type (an identifier,
     * {@code *}, {@code &} or {@code >}). CUDA accepts the execution space among the declaration's specifiers.
     */
    private static Set<Integer> helperNames(List<MslTokens.Token> t, Set<String> kernels) {
        Set<Integer> names = new HashSet<>();
        for (int i = 0; i < t.size(); i++) {
            if (!t.get(i).is("{")) {
                continue;
            }
            int j = previousSignificant(t, i - 1);
            if (j >= 0 && t.get(j).is("const")) {
                j = previousSignificant(t, j - 1);
            }
            if (j < 0 || !t.get(j).is(")")) {
                continue;
            }
            int open = matchingOpen(t, j);
            int name = open < 0 ? -1 : previousSignificant(t, open - 1);
            if (name < 0
                    || t.get(name).kind() != MslTokens.Kind.IDENTIFIER
                    || NOT_FUNCTIONS.contains(t.get(name).text())
                    || kernels.contains(t.get(name).text())) {
                continue;
            }
            int before = previousSignificant(t, name - 1);
            if (before >= 0
                    && (t.get(before).kind() == MslTokens.Kind.IDENTIFIER
                            || t.get(before).is("*")
                            || t.get(before).is("&")
                            || t.get(before).is(">"))) {
                names.add(name);
            }
        }
        return names;
    }

    /** The index of the second {@code ]} of the attribute whose {@code [[} starts at {@code i}. */
    private static int attributeEnd(List<MslTokens.Token> t, int i) {
        for (int k = i + 2; k + 1 < t.size(); k++) {
            if (t.get(k).is("]") && t.get(k + 1).is("]")) {
                return k + 1;
            }
        }
        throw new IllegalArgumentException("an attribute [[ is never closed");
    }

    /**
     * Whether the token at {@code i} is an address-space qualifier: one of the words, before a type (an
     * identifier: {@code device const float *}, {@code constant Args &}), not a name that reads so
     * ({@code float device;}, {@code s.device}).
     */
    private static boolean isAddressSpace(List<MslTokens.Token> t, int i) {
        if (t.get(i).kind() != MslTokens.Kind.IDENTIFIER
                || !ADDRESS_SPACES.contains(t.get(i).text())) {
            return false;
        }
        int before = previousSignificant(t, i - 1);
        boolean member = before >= 0
                && (t.get(before).is(".")
                        || t.get(before).is("->")
                        || t.get(before).is("::"));
        return !member && next(t, nextSignificant(t, i + 1), 0).kind() == MslTokens.Kind.IDENTIFIER;
    }

    private static int matchingOpen(List<MslTokens.Token> t, int close) {
        int depth = 0;
        for (int k = close; k >= 0; k--) {
            if (t.get(k).is(")")) {
                depth++;
            } else if (t.get(k).is("(") && --depth == 0) {
                return k;
            }
        }
        return -1;
    }

    private static MslTokens.Token next(List<MslTokens.Token> t, int i, int ahead) {
        return i + ahead < t.size() ? t.get(i + ahead) : MslTokens.Token.END;
    }

    private static int nextSignificant(List<MslTokens.Token> t, int i) {
        while (i < t.size() && t.get(i).kind() == MslTokens.Kind.SPACE) {
            i++;
        }
        return Math.min(i, t.size() - 1);
    }

    private static int previousSignificant(List<MslTokens.Token> t, int i) {
        while (i >= 0 && t.get(i).kind() == MslTokens.Kind.SPACE) {
            i--;
        }
        return i;
    }

    private static String text(List<MslTokens.Token> t, int from, int to) {
        StringBuilder sb = new StringBuilder();
        for (int k = from; k <= to; k++) {
            sb.append(t.get(k).text());
        }
        return sb.toString();
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
        String type = withoutAddressSpaces(p.type());
        return switch (p.binding()) {
            case KernelParam.Buffer b ->
                p.isReference()
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
            case "thread_position_in_grid" ->
                new String[] {
                    "(blockIdx.x * blockDim.x + threadIdx.x)",
                    "(blockIdx.y * blockDim.y + threadIdx.y)",
                    "(blockIdx.z * blockDim.z + threadIdx.z)"
                };
            case "thread_index_in_threadgroup" -> new String[] {"glimmer_tid"};
            case "thread_index_in_simdgroup" -> new String[] {"(glimmer_tid % 32)"};
            case "simdgroup_index_in_threadgroup" -> new String[] {"(glimmer_tid / 32)"};
            case "threads_per_simdgroup" -> new String[] {"32u"};
            case "simdgroups_per_threadgroup" -> new String[] {"((blockDim.x * blockDim.y * blockDim.z + 31) / 32)"};
            default ->
                throw new IllegalArgumentException("kernel " + kernel + ": parameter " + name + " has the builtin [["
                        + attribute + "]], which the CUDA rewrite does not map");
        };
        if (type.endsWith("3") && v.length == 3) {
            return "glimmer_uint3(" + v[0] + ", " + v[1] + ", " + v[2] + ")";
        }
        if (type.endsWith("2") && v.length == 3) {
            return "glimmer_uint2(" + v[0] + ", " + v[1] + ")";
        }
        return v[0];
    }

    /** An MSL parameter type without its address-space qualifiers, e.g. {@code float *} for {@code device float *}. */
    private static String withoutAddressSpaces(String type) {
        return rewriteTokens(MslTokens.lex(type), Set.of(), new HashMap<>());
    }
}
