package dev.glimmer.kernels.decode;

import java.util.Map;

/** A model as the decode command list sees it: its shape and its weight tensors by GGUF name. */
public record DecodeModel(ModelShape shape, Map<String, WeightTensor> tensors) {

    public DecodeModel {
        tensors = Map.copyOf(tensors);
    }

    public WeightTensor tensor(String name) {
        WeightTensor t = tensors.get(name);
        if (t == null) {
            throw new IllegalArgumentException("the model has no tensor " + name);
        }
        return t;
    }

    public boolean has(String name) {
        return tensors.containsKey(name);
    }

    /**
     * The weight bytes one decode token must read: every tensor once, except one row of the token
     * embedding (unless it doubles as the output matrix) and, of each stacked expert tensor, the
     * share of the experts used.
     */
    public long activeWeightBytes() {
        long total = 0;
        boolean tied = !tensors.containsKey("output.weight");
        for (WeightTensor t : tensors.values()) {
            if (t.name().equals("token_embd.weight") && !tied) {
                total += t.bytes() / shape.vocab();
            } else if (t.name().endsWith("_exps.weight")) {
                total += t.bytes() / shape.experts() * shape.expertsUsed();
            } else {
                total += t.bytes();
            }
        }
        return total;
    }
}
