package dev.glimmer.kernels;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The threadgroup geometry of the kernels, in one place: the host side sizes its grids with these
 * values and {@link KernelLibrary} hands them to the kernels as {@code #define}s, so the two can
 * never disagree.
 */
public final class Geometry {

    /** Threads per SIMD-group on Apple GPUs (and per warp on NVIDIA). */
    public static final int SIMD_WIDTH = 32;
    /** Rows of a weight matrix that one SIMD-group of a mat-vec computes together (activations are loaded once for them). */
    public static final int MV_ROWS_PER_SIMDGROUP = 4;
    /** SIMD-groups per threadgroup of the mat-vec kernels. */
    public static final int MV_SIMDGROUPS = 2;
    /** Rows one mat-vec threadgroup computes. */
    public static final int MV_ROWS_PER_THREADGROUP = MV_ROWS_PER_SIMDGROUP * MV_SIMDGROUPS;
    /** SIMD-groups of the threadgroups that first reduce a whole vector (norms, router, argmax, per-head kernels). */
    public static final int WIDE_SIMDGROUPS = 8;
    /** Values of a weight row one lane handles per step: a half Q4_0 block, a sixteenth of a K-quant block. */
    public static final int CHUNK = 16;
    /** Threadgroups the attention splits the KV length into: fixed, so that the grid never depends on it. */
    public static final int ATTENTION_SPLITS = 32;
    /** Heads one SIMD-group of mla_attention can hold in registers ({@code MAX_HEADS_PER_SIMDGROUP}). */
    public static final int ATTENTION_MAX_HEADS = WIDE_SIMDGROUPS * 4;
    /** Latent + rope values of a cache row mla_attention can hold in registers (32 lanes x {@code MAX_DIMS_PER_LANE}). */
    public static final int ATTENTION_MAX_ROW = SIMD_WIDTH * 18;
    /** Threadgroup memory of Apple GPUs. */
    public static final int MAX_THREADGROUP_MEMORY = 32 * 1024;
    /** Buffer bindings an indirect compute command can set. */
    public static final int MAX_BUFFER_BINDINGS = 31;

    private Geometry() {
    }

    /** The constants as the kernels see them: {@code GLIMMER_<NAME>} macros. */
    public static Map<String, Integer> defines() {
        Map<String, Integer> d = new LinkedHashMap<>();
        d.put("GLIMMER_SIMD_WIDTH", SIMD_WIDTH);
        d.put("GLIMMER_MV_ROWS_PER_SIMDGROUP", MV_ROWS_PER_SIMDGROUP);
        d.put("GLIMMER_MV_SIMDGROUPS", MV_SIMDGROUPS);
        d.put("GLIMMER_WIDE_SIMDGROUPS", WIDE_SIMDGROUPS);
        d.put("GLIMMER_CHUNK", CHUNK);
        return d;
    }
}
