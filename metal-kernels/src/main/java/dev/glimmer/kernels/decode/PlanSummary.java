package dev.glimmer.kernels.decode;

import java.util.Map;
import java.util.TreeMap;

/**
 * The facts about a decode command list that say whether it fits the GPU and does no wasted work
 * ({@code ./glimmer plan}).
 *
 * @param dispatches             dispatches per token
 * @param dispatchesPerLayer     per layer index (-1: embedding, output, argmax)
 * @param dispatchesPerKernel    per kernel name
 * @param weightBytesPerToken    weight bytes one step reads
 * @param activeWeightBytes      the model's active weight bytes (every tensor, one embedding row, the used experts' share)
 * @param threadgroupMemory      the largest threadgroup memory per kernel, in bytes
 * @param maxBindings            the most buffer bindings of any dispatch
 * @param maxBindingOffset       the largest binding offset
 * @param weightBuffers          buffers the model file is split into
 * @param kvCacheBytes           bytes of the KV cache buffers
 * @param activationBytes        bytes of the activations buffer
 */
public record PlanSummary(
        int dispatches,
        Map<Integer, Integer> dispatchesPerLayer,
        Map<String, Integer> dispatchesPerKernel,
        long weightBytesPerToken,
        long activeWeightBytes,
        Map<String, Integer> threadgroupMemory,
        int maxBindings,
        long maxBindingOffset,
        int weightBuffers,
        long kvCacheBytes,
        long activationBytes) {

    public static PlanSummary of(DecodeModel model, CommandList list) {
        Map<Integer, Integer> perLayer = new TreeMap<>();
        Map<String, Integer> perKernel = new TreeMap<>();
        Map<String, Integer> memory = new TreeMap<>();
        int maxBindings = 0;
        long maxOffset = 0;
        for (Dispatch d : list.dispatches()) {
            perLayer.merge(d.layer(), 1, Integer::sum);
            perKernel.merge(d.kernel(), 1, Integer::sum);
            memory.merge(d.kernel(), d.threadgroupMemoryBytes(), Math::max);
            maxBindings = Math.max(maxBindings, d.bindings().size());
            for (Dispatch.Binding b : d.bindings()) {
                maxOffset = Math.max(maxOffset, b.offset());
            }
        }
        long kv = 0;
        long activations = 0;
        int weightBuffers = 0;
        for (BufferSpec b : list.buffers()) {
            switch (b.kind()) {
                case KV_CACHE -> kv += b.bytes();
                case ACTIVATIONS -> activations += b.bytes();
                case WEIGHTS -> weightBuffers++;
                default -> {}
            }
        }
        return new PlanSummary(
                list.dispatches().size(),
                perLayer,
                perKernel,
                list.weightBytesPerStep(),
                model.activeWeightBytes(),
                memory,
                maxBindings,
                maxOffset,
                weightBuffers,
                kv,
                activations);
    }

    /** The most dispatches of any layer. */
    public int maxDispatchesPerLayer() {
        return dispatchesPerLayer.entrySet().stream()
                .filter(e -> e.getKey() >= 0)
                .mapToInt(Map.Entry::getValue)
                .max()
                .orElse(0);
    }
}
