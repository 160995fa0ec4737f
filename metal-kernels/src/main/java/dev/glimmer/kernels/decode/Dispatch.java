package dev.glimmer.kernels.decode;

import dev.glimmer.kernels.Size3;
import java.util.List;

/**
 * One compute dispatch of the decode step.
 *
 * @param kernel            the kernel name
 * @param layer             the layer it belongs to, -1 for the embedding and the output
 * @param bindings          the buffer bound at each index, by buffer number and offset
 * @param grid              threadgroups
 * @param threads           threads per threadgroup
 * @param threadgroupMemory bytes at each threadgroup-memory index (multiples of 16)
 * @param barrier           whether it waits for all earlier dispatches
 * @param weightReads       the weight tensors it reads and how many of their bytes
 * @param multiplyAdds      the multiply-adds of its weight matrices (rows x columns x tokens, the experts' routed
 *                          entries) in one run with a token in every row of the list, or of the prompt list's
 *                          attention on tiles (for a batch at the start of a sequence); 0 for a kernel that
 *                          multiplies no weight matrix (norms, RoPE, the split attention, routing)
 */
public record Dispatch(
        String kernel,
        int layer,
        List<Binding> bindings,
        Size3 grid,
        Size3 threads,
        int[] threadgroupMemory,
        boolean barrier,
        List<WeightRead> weightReads,
        long multiplyAdds) {

    public Dispatch {
        bindings = List.copyOf(bindings);
        threadgroupMemory = threadgroupMemory.clone();
        weightReads = List.copyOf(weightReads);
    }

    /** A dispatch that multiplies no weight matrix. */
    public Dispatch(
            String kernel,
            int layer,
            List<Binding> bindings,
            Size3 grid,
            Size3 threads,
            int[] threadgroupMemory,
            boolean barrier,
            List<WeightRead> weightReads) {
        this(kernel, layer, bindings, grid, threads, threadgroupMemory, barrier, weightReads, 0);
    }

    /** Buffer {@code buffer} at {@code offset} bound at buffer index {@code index}. */
    public record Binding(int index, int buffer, long offset) {}

    /** {@code bytes} of weight tensor {@code tensor} read per execution. */
    public record WeightRead(String tensor, long bytes) {}

    public int threadgroupMemoryBytes() {
        int total = 0;
        for (int b : threadgroupMemory) {
            total += b;
        }
        return total;
    }
}
