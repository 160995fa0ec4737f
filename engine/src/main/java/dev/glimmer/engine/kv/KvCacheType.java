package dev.glimmer.engine.kv;

/** How the KV cache stores its values. F16 halves the memory and is llama.cpp's default. */
public enum KvCacheType {
    F16(2), F32(4);

    /** The type used when none is configured: F16, like llama.cpp. */
    public static final KvCacheType DEFAULT = F16;

    /** Bytes per stored value. */
    public final int bytes;

    KvCacheType(int bytes) {
        this.bytes = bytes;
    }
}
