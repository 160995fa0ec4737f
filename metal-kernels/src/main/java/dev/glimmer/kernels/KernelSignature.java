package dev.glimmer.kernels;

import java.util.List;

/** A kernel's name and parameters as written in its .metal source. */
public record KernelSignature(String name, List<KernelParam> params) {

    public KernelSignature {
        params = List.copyOf(params);
    }

    /** The highest buffer index plus one: the buffer bindings a dispatch of this kernel sets. */
    public int bufferCount() {
        return params.stream()
                .mapToInt(p -> p.binding() instanceof KernelParam.Buffer b ? b.index() + 1 : 0)
                .max()
                .orElse(0);
    }

    /** The highest threadgroup-memory index plus one. */
    public int threadgroupMemoryCount() {
        return params.stream()
                .mapToInt(p -> p.binding() instanceof KernelParam.ThreadgroupMemory t ? t.index() + 1 : 0)
                .max()
                .orElse(0);
    }

    /** The parameter bound to buffer {@code index}. */
    public KernelParam buffer(int index) {
        return params.stream()
                .filter(p -> p.binding() instanceof KernelParam.Buffer b && b.index() == index)
                .findFirst()
                .orElseThrow(() -> new IllegalArgumentException(name + " has no buffer(" + index + ")"));
    }
}
