package dev.glimmer.kernels;

/**
 * One kernel parameter: its C type as written (address space included, e.g.
 * {@code device const char *}), its name and what the host binds to it.
 */
public record KernelParam(String type, String name, Binding binding) {

    /** Where a parameter's value comes from. */
    public sealed interface Binding permits Buffer, ThreadgroupMemory, Builtin {}

    /** {@code [[buffer(index)]]}: a device or constant buffer binding. */
    public record Buffer(int index) implements Binding {}

    /** {@code TG_MEM(index)}: threadgroup memory whose length the dispatch sets. */
    public record ThreadgroupMemory(int index) implements Binding {}

    /** An attribute builtin such as {@code threadgroup_position_in_grid}. */
    public record Builtin(String attribute) implements Binding {}

    /** Whether the parameter is a reference ({@code constant Args & a}) rather than a pointer. */
    public boolean isReference() {
        return type.endsWith("&");
    }
}
