package dev.glimmer.kernels.decode;

/**
 * One buffer of the command list.
 *
 * @param name       for messages and the plan
 * @param kind       what it holds
 * @param bytes      its length
 * @param fileOffset for {@link Kind#WEIGHTS}: where the range starts in the model file (page aligned)
 */
public record BufferSpec(String name, Kind kind, long bytes, long fileOffset) {

    public enum Kind {
        /** A range of the mapped model file (Metal: {@code newBufferWithBytesNoCopy}). */
        WEIGHTS,
        /** The kernels' argument structs, written once when the list is built ({@link CommandList#args()}). */
        ARGS,
        /** {@code StepArgs}: token, position, KV length; written before each token. */
        STEP,
        /** Activations and scratch of one step. */
        ACTIVATIONS,
        /** The latent KV cache of one layer. */
        KV_CACHE,
        /**
         * Each sequence's latest greedy token, a uint per slot of the pool ({@code StepArgs.slot}): the argmax writes
         * it, the embedding of a chained step reads it ({@code Geometry.PREVIOUS_GREEDY}).
         */
        GREEDY_TOKENS,
        /**
         * A drafting pool's trunk outputs: each sequence's last {@code Geometry.MAX_DRAFTS + 1}, the NextN block's input
         * at the position after each (token.metal's nextn_input and keep_outputs).
         */
        TRUNK_OUTPUTS;

        /** One buffer for every list of a pool (bound over one KV pool): the state a sequence carries between runs. */
        public boolean pooled() {
            return this == KV_CACHE || this == GREEDY_TOKENS || this == TRUNK_OUTPUTS;
        }
    }
}
