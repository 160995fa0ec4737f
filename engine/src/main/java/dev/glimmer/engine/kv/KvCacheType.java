package dev.glimmer.engine.kv;

import dev.glimmer.kernels.decode.DecodeCommandListBuilder;

/** How the KV cache stores its values. F16 halves the memory and is llama.cpp's default. */
public enum KvCacheType {
    F16(2),
    F32(4);

    /** The type used when none is configured: F16, like llama.cpp. */
    public static final KvCacheType DEFAULT = F16;

    /**
     * The GPU backends' cache: the kernels store halves ({@link DecodeCommandListBuilder#KV_VALUE_BYTES}). The CPU
     * forward pass a GPU is checked against (the self-test, the emulated and CUDA tests) stores the same.
     */
    public static final KvCacheType GPU = ofBytes(DecodeCommandListBuilder.KV_VALUE_BYTES);

    /** Bytes per stored value. */
    public final int bytes;

    KvCacheType(int bytes) {
        this.bytes = bytes;
    }

    private static KvCacheType ofBytes(int bytes) {
        for (KvCacheType t : values()) {
            if (t.bytes == bytes) {
                return t;
            }
        }
        throw new IllegalStateException("no KV cache type of " + bytes + " bytes a value");
    }
}
