package dev.glimmer.kernels.emulator;

import dev.glimmer.kernels.KernelLibrary;
import dev.glimmer.kernels.KernelParam;
import dev.glimmer.kernels.KernelSignature;
import java.util.ArrayList;
import java.util.List;

/**
 * Writes the emulator's translation unit: the prelude, the kernel sources, and per kernel one C
 * entry point {@code glimmer_thunk_NAME(buffers, threadgroupMemory, ids)} that maps every
 * parameter from its binding, so the C++ side never maps arguments by hand.
 */
final class ThunkGenerator {

    private ThunkGenerator() {}

    static String thunkName(String kernel) {
        return "glimmer_thunk_" + kernel;
    }

    static String translationUnit(KernelLibrary library) {
        StringBuilder sb = new StringBuilder();
        sb.append("#include \"prelude.h\"\n");
        sb.append(KernelLibrary.concatenate(library.files()));
        sb.append("#line 1 \"generated-thunks\"\n");
        for (KernelSignature k : library.kernels()) {
            sb.append(thunk(k));
        }
        return sb.toString();
    }

    static String thunk(KernelSignature k) {
        List<String> args = new ArrayList<>();
        for (KernelParam p : k.params()) {
            args.add(
                    switch (p.binding()) {
                        case KernelParam.Buffer b ->
                            p.isReference()
                                    ? "*("
                                            + p.type()
                                                    .substring(0, p.type().length() - 1)
                                                    .trim() + " *) buffers[" + b.index() + "]"
                                    : "(" + p.type() + ") buffers[" + b.index() + "]";
                        case KernelParam.ThreadgroupMemory m ->
                            "(" + p.type() + ") threadgroupMemory[" + m.index() + "]";
                        case KernelParam.Builtin b -> builtin(k, p, b.attribute());
                    });
        }
        return "extern \"C\" void " + thunkName(k.name())
                + "(void* const* buffers, void* const* threadgroupMemory, const GlimmerThreadIds* ids) {\n    "
                + k.name() + "(" + String.join(",\n        ", args) + ");\n}\n";
    }

    private static String builtin(KernelSignature k, KernelParam p, String attribute) {
        String value = switch (attribute) {
            case "threadgroup_position_in_grid",
                    "threadgroups_per_grid",
                    "thread_position_in_threadgroup",
                    "threads_per_threadgroup",
                    "thread_position_in_grid",
                    "thread_index_in_threadgroup",
                    "thread_index_in_simdgroup",
                    "simdgroup_index_in_threadgroup",
                    "threads_per_simdgroup",
                    "simdgroups_per_threadgroup" -> "ids->" + attribute;
            default ->
                throw new IllegalArgumentException("kernel " + k.name() + ": unsupported attribute [[" + attribute
                        + "]] on parameter " + p.name());
        };
        boolean vector = p.type().endsWith("3");
        return vector && !p.type().equals("uint3") ? "__builtin_convertvector(" + value + ", " + p.type() + ")" : value;
    }
}
