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

    /**
     * A {@code StepArgs} token (as a uint: 0xFFFFFFFF) that stands for its sequence's latest greedy token, which the
     * argmax of the sequence's previous run left on the device: a chained step, queued before that token is read.
     */
    public static final int PREVIOUS_GREEDY = -1;
    /** Rows of a weight matrix that one SIMD-group of a mat-vec computes together (activations are loaded once for them). */
    public static final int MV_ROWS_PER_SIMDGROUP = 4;
    /**
     * Tokens of a tile of mat_mat, the prompt kernel of the dense weights (tiles.metal): each weight value is
     * dequantized once for all of them. A batch of {@link #PROMPT_TOKENS} fills its tiles.
     */
    public static final int MM_TOKENS = 64;
    /** Weight rows of a tile of mat_mat: a tile of {@link #MM_TOKENS} x this, as tall as wide. */
    public static final int MM_ROWS = 64;
    /**
     * Tokens of a tile of the grouped experts (moe_experts_gate_up, moe_experts_down): an expert's block of its
     * token list is one tile, and the experts get about 32 tokens each in a batch of {@link #PROMPT_TOKENS} with
     * 4 of 64 experts routed (some fewer, some a second, partly filled tile), so the experts' tiles are narrower
     * in tokens than mat_mat's and taller in rows.
     */
    public static final int EXPERT_TOKENS = 32;
    /** Weight rows of a tile of the grouped experts (moe_experts_gate_up: half gate, half up rows). */
    public static final int EXPERT_ROWS = 128;
    /**
     * Tokens per weight chunk of mat_mat_float, which multiplies in float rather than on the matrix units (F32
     * weights, and every weight of a batch decode list): with {@link #MV_ROWS_PER_SIMDGROUP} rows per SIMD-group,
     * one sum per lane.
     */
    public static final int MM_FLOAT_TOKENS = SIMD_WIDTH / MV_ROWS_PER_SIMDGROUP;
    /** Values of a row that a tile multiplies per step (a Q4_0 block; two chunks). */
    public static final int MM_DEPTH = 32;
    /**
     * SIMD-groups per threadgroup of the prompt kernels' tiles (both shapes); each multiplies a block of
     * {@link #MM_SIMDGROUP_ROWS} x {@link #MM_SIMDGROUP_TOKENS} of its tile per step.
     */
    public static final int MM_SIMDGROUPS = 4;
    /**
     * Rows of a SIMD-group's block of a tile: two 16-row matrix-unit tiles, so that each activation fragment read
     * from threadgroup memory feeds two multiplies.
     */
    public static final int MM_SIMDGROUP_ROWS = 32;
    /** Tokens of a SIMD-group's block of a tile: four 8-token tiles, so that each weight fragment feeds four. */
    public static final int MM_SIMDGROUP_TOKENS = 32;
    /**
     * Halves between two rows of a step's staged weights and activations: MM_DEPTH and 8 of padding, so that
     * the 8 rows a tile operation reads at once lie in different memory banks.
     */
    public static final int MM_HALF_STRIDE = MM_DEPTH + 8;
    /**
     * Floats of padding after each token's row of a tile's sums in threadgroup memory (rows + this between two
     * tokens), for the same reason as {@link #MM_HALF_STRIDE}'s.
     */
    public static final int MM_FLOAT_PAD = 4;
    /**
     * Threadgroups a mat_mat dispatch should have at least: an H200 holds 528 of its threadgroups at once (4 per
     * multiprocessor), and attn_output's 256 for a batch of 512 tokens left half of them idle (ncu: 7.7 warps per
     * multiprocessor). A single matrix with fewer splits its columns into parts ({@link #mmParts}).
     */
    public static final int MM_MIN_THREADGROUPS = 512;
    /** Fewest columns of a part of mat_mat: a multiple of every format's block (256 values for the K-quants). */
    public static final int MM_PART_COLUMNS = 256;
    /** Threadgroup memory (floats) of mat_mat_float: a sum per lane of every SIMD-group, for the split's reduction. */
    public static final int MM_FLOAT_PARTIALS = MM_SIMDGROUPS * SIMD_WIDTH;
    /**
     * Query rows (token x head, in q's order) of a threadgroup of the prompt list's attention on tiles
     * (mla_flash_attention): 16-row operands of the matrix units. Each threadgroup keeps their softmax-weighted
     * latent sums (up to {@link #FA_MAX_LATENT} values each) in registers, spread over its SIMD-groups; the more rows,
     * the fewer times each cached row is read.
     */
    public static final int FA_QUERIES = 32;
    /** Keys (cached rows) mla_flash_attention scores per block: 8 per SIMD-group (one tile's tokens) and 16 queries. */
    public static final int FA_KEYS = 32;
    /** SIMD-groups of mla_flash_attention's threadgroups: one per 16 queries and 8 keys of a block's scores. */
    public static final int FA_SIMDGROUPS = FA_QUERIES / 16 * (FA_KEYS / 8);
    /** Values of the queries and keys (latent + rope) mla_flash_attention stages per step of the scores. */
    public static final int FA_DEPTH = 64;
    /** Latent values per step of mla_flash_attention's weighted sum, shared out among its SIMD-groups in 16-value tiles. */
    public static final int FA_VALUES = 128;
    /** Most latent values (kv_lora_rank) mla_flash_attention holds per query row: GLM-4.7-Flash's 512. */
    public static final int FA_MAX_LATENT = 512;
    /**
     * Most parts mla_flash_attention splits the keys of a block of query rows into (its grid's second dimension),
     * merged by mla_flash_merge. A prompt batch after a long cached prefix has as many threadgroups as without one,
     * each walking every cached row: without splits, 320 threadgroups (a batch of 512 tokens) kept the GPU half idle
     * at the end of a 4,096-token prompt. Each split's partial sums take latent + 2 floats per query row (GLM-4.7-Flash:
     * 41 KB a token per split, 84 MB for a batch of 512 tokens with 4).
     */
    public static final int FA_SPLITS = 4;
    /**
     * Keys per part of mla_flash_attention: a block of query rows that sees k keys splits them into ceil(k /
     * FA_SPLIT_KEYS) parts of whole key blocks, at most {@link #FA_SPLITS}; up to this many keys it is one part.
     */
    public static final int FA_SPLIT_KEYS = 256;
    /** SIMD-groups per threadgroup of the mat-vec kernels. */
    public static final int MV_SIMDGROUPS = 8;
    /**
     * Rows of a mat-vec dispatch (all its matrices and slots together) from which each SIMD-group takes
     * whole rows; below, {@link #MV_FEW_ROWS_SPLIT} SIMD-groups share each row set's columns, which keeps
     * enough warps in flight to hide memory latency when a matrix has few rows. Measured on an H200
     * (full-size GLM-4.7-Flash Q4_0): gate+up (7,680 rows; each threadgroup also normalizes its input
     * and selects its expert) is fastest unsplit (split 2 or 4: 6-8% slower decode), attn_output, down
     * and q_a/kv_a (up to 2,048 rows) with 4 (2: 10% slower, 1: 25%, 8: 4%).
     */
    public static final long MV_MANY_ROWS = 4096;
    /** SIMD-groups per row set of a mat-vec with fewer than {@link #MV_MANY_ROWS} rows. */
    public static final int MV_FEW_ROWS_SPLIT = 4;
    /** Threadgroup memory (floats) of the mat-vec kernels: the partial row sums of every SIMD-group (and the norm's sums). */
    public static final int MV_SCRATCH_FLOATS = MV_SIMDGROUPS * MV_ROWS_PER_SIMDGROUP;
    /** SIMD-groups of the threadgroups of embed_row, argmax and mla_attention. */
    public static final int WIDE_SIMDGROUPS = 8;
    /**
     * SIMD-groups of moe_route's threadgroups, one per expert, each listing a whole prompt batch's entries of
     * its expert: as wide as Apple GPUs allow (1024 threads).
     */
    public static final int HEAD_SIMDGROUPS = 32;
    /**
     * Threadgroups per head of the decode step's mla_merge_latent, each merging a share of the latent values: at long
     * contexts a head merges a hundred splits per value, too slow for one threadgroup per head (10% of a step at
     * 4,096 of context on an H200).
     */
    public static final int MERGE_PARTS = 8;
    /** Threadgroups of argmax_parts, the first stage of the argmax over the vocabulary: about one per SM. */
    public static final int ARGMAX_PARTS = 128;
    /** Values of a weight row one lane handles per step: a half Q4_0 block, a sixteenth of a K-quant block. */
    public static final int CHUNK = 16;
    /**
     * Threadgroups the attention splits the KV length into: fixed, so that the grid never depends on it;
     * about one per SM of an H100/H200 (132), since at long contexts the attention is most of a step.
     */
    public static final int ATTENTION_SPLITS = 128;
    /**
     * Fewest threadgroups of mla_attention per row of a batch decode list ({@link #ATTENTION_SPLITS} shared out
     * among its rows): each row's partials (heads x (latent + 2) floats per split) stay small.
     */
    public static final int BATCH_MIN_ATTENTION_SPLITS = 8;
    /**
     * Tokens of a prompt batch: the token count of the prompt command list, whose kernels dequantize each
     * weight value once for a tile of {@link #MM_TOKENS} (experts: {@link #EXPERT_TOKENS}) of them; longer prompts
     * run in several batches. The more tokens, the fuller each expert's tiles: with 4 of 64 experts routed, 512
     * tokens give an expert {@link #EXPERT_TOKENS} entries on average (one full tile; 256 half of one), and more would only add tiles
     * of the same fill. Measured on an H200 (full-size GLM-4.7-Flash Q4_0, with the earlier tiles of 8 tokens
     * and no matrix units), 256 processed prompts 8.6% faster than 128 (pp512 1,220 against 1,123 tok/s); with the
     * matrix-unit tiles (docs/BENCHMARKS.md), 256 / 512 / 1,024 / 2,048 gave pp512 2,737 / 3,898 / 3,611 / - and
     * pp4096 1,421 / 1,725 / 2,197 / 2,535 tok/s: longer lists help long prompts (more attention threadgroups
     * over the cached prefix) and cost short ones, and the server feeds the list in 512-token chunks. The
     * batch's activations (about 0.5 MB per token) belong to the model's pool, not to each sequence.
     */
    public static final int PROMPT_TOKENS = 512;

    /**
     * Tokens a speculative step of the command lists drafts at most with the model's NextN block (docs/SPECULATIVE.md):
     * the draft list drafts one, the verification runs it with the token before as two rows of a batch list. Each
     * sequence keeps its trunk's last {@code MAX_DRAFTS + 1} outputs on the device, the block's input after any
     * verification.
     */
    public static final int MAX_DRAFTS = 1;
    /**
     * Most rows of a batch decode list (one token of each of that many sequences per step); a pool of more
     * sequences steps them in turns of this many.
     */
    public static final int BATCH_MAX_ROWS = 64;
    /**
     * Fewest cached rows per attention split (one block of {@code ATTENTION_BLOCK} rows): at short contexts only the
     * first splits get rows and the merge reads only their partials. One threadgroup walks its rows one block after
     * another, so fewer rows each put more threadgroups on a short context: measured on an H200 (full-size random
     * Q4_0, chained greedy decode from an empty context), tg128 195.2 / 195.4 tok/s with 16, 203.9 with 8 and 207.6
     * with 4; at 4,096 of context every split has 32 rows either way (tg64 161.4 against 161.6).
     */
    public static final int ATTENTION_MIN_ROWS = 4;
    /** Heads one SIMD-group of mla_attention can hold in registers ({@code MAX_HEADS_PER_SIMDGROUP}). */
    public static final int ATTENTION_MAX_HEADS = WIDE_SIMDGROUPS * 3;
    /** Latent + rope values of a cache row mla_attention can hold in registers (32 lanes x {@code MAX_DIMS_PER_LANE}). */
    public static final int ATTENTION_MAX_ROW = SIMD_WIDTH * 18;
    /** Routed experts the selection in moe_gate_up holds in registers (32 lanes x {@code MAX_EXPERTS_PER_LANE}). */
    public static final int ROUTER_MAX_EXPERTS = SIMD_WIDTH * 8;
    /** Threadgroup memory of Apple GPUs. */
    public static final int MAX_THREADGROUP_MEMORY = 32 * 1024;
    /**
     * Dispatches one layer of the decode step may take: each is a dependent launch, which costs a few microseconds
     * of latency whatever it computes, so more, smaller kernels pay only while they keep the GPU busier.
     */
    public static final int MAX_DISPATCHES_PER_LAYER = 12;
    /** Buffer bindings an indirect compute command can set. */
    public static final int MAX_BUFFER_BINDINGS = 31;

    static {
        // mm_tile (tiles.metal) gives each thread of a tile's threadgroup whole weight chunks and runs of 8
        // activations per step, and each SIMD-group one block of the tile
        checkTile(MM_ROWS, MM_TOKENS);
        checkTile(EXPERT_ROWS, EXPERT_TOKENS);
        // tiles.metal's Q4_0 rows: a step stages one block of each row, two chunks, into 16-byte aligned tile rows
        if (MM_DEPTH != WeightFormat.Q4_0.blockValues || MM_DEPTH != 2 * CHUNK || MM_HALF_STRIDE % 8 != 0) {
            throw new AssertionError("a prompt tile's step is not one Q4_0 block in 16-byte aligned rows");
        }
    }

    private static void checkTile(int rows, int tokens) {
        int threads = MM_SIMDGROUPS * SIMD_WIDTH;
        if (rows * (MM_DEPTH / CHUNK) % threads != 0
                || tokens * (MM_DEPTH / 8) % threads != 0
                || (rows / MM_SIMDGROUP_ROWS) * (tokens / MM_SIMDGROUP_TOKENS) != MM_SIMDGROUPS
                || rows % MM_SIMDGROUP_ROWS != 0
                || tokens % MM_SIMDGROUP_TOKENS != 0
                || 4 * mmMemoryFloats(rows, tokens) > MAX_THREADGROUP_MEMORY) {
            throw new AssertionError("a prompt tile of " + rows + " rows x " + tokens + " tokens x " + MM_DEPTH
                    + " values does not split into whole chunks and activation runs for its " + threads
                    + " threads and blocks for its " + MM_SIMDGROUPS + " SIMD-groups within the threadgroup memory");
        }
    }

    static {
        // mla_flash_attention: its softmax gives each query row 8 threads; each SIMD-group owns whole 16-value tiles
        // of every step of the weighted sums
        if (FA_QUERIES % 16 != 0
                || FA_QUERIES * 8 != FA_SIMDGROUPS * SIMD_WIDTH
                || FA_DEPTH % 16 != 0
                || FA_KEYS % 16 != 0
                || FA_VALUES % (16 * FA_SIMDGROUPS) != 0
                || FA_MAX_LATENT % FA_VALUES != 0
                || FA_QUERIES * (FA_DEPTH / 4) % (FA_SIMDGROUPS * SIMD_WIDTH) != 0
                || FA_KEYS * (FA_DEPTH / 4) % (FA_SIMDGROUPS * SIMD_WIDTH) != 0
                || FA_KEYS / 2 * (FA_VALUES / 4) % (FA_SIMDGROUPS * SIMD_WIDTH) != 0
                || FA_QUERIES % WIDE_SIMDGROUPS != 0) { // mla_flash_merge: a SIMD-group per query row
            throw new AssertionError("mla_flash_attention's geometry does not fit its tiles");
        }
    }

    private Geometry() {}

    /**
     * SIMD-groups per row set (the kernels' {@code split} argument) of a mat-vec dispatch over {@code rows}
     * rows in all (rows one SIMD-group computes together, such as gate and up, count once).
     */
    public static int mvSplit(long rows) {
        return rows >= MV_MANY_ROWS ? 1 : MV_FEW_ROWS_SPLIT;
    }

    /** Rows one threadgroup of mat_mat_float computes with {@code split} SIMD-groups per row set. */
    public static int mmFloatRowsPerThreadgroup(int split) {
        return MV_ROWS_PER_SIMDGROUP * MM_SIMDGROUPS / split;
    }

    /** Rows one mat-vec threadgroup computes with {@code split} SIMD-groups per row set. */
    public static int mvRowsPerThreadgroup(int split) {
        return MV_ROWS_PER_SIMDGROUP * MV_SIMDGROUPS / split;
    }

    /**
     * The batch decode lists a pool of {@code slots} sequences builds: 2, 4, 8, ... rows up to the first power
     * of two that holds every slot, at most {@link #BATCH_MAX_ROWS} (none for a pool of one). A step of n
     * sequences runs the smallest that holds them: the unused rows' threadgroups return at once, and
     * the weights are read once whatever the row count.
     */
    public static java.util.List<Integer> batchSizes(int slots) {
        java.util.List<Integer> sizes = new java.util.ArrayList<>();
        for (int rows = 2; rows < 2 * Math.min(slots, BATCH_MAX_ROWS) && rows <= BATCH_MAX_ROWS; rows *= 2) {
            sizes.add(rows);
        }
        return sizes;
    }

    /**
     * Threadgroup memory (floats) of a prompt kernel's tile of {@code rows} x {@code tokens}: two stages (double
     * buffering) of a step's staged weights and activations (two halves each) as halves, later the tile's sums as
     * floats in the same place.
     */
    public static int mmMemoryFloats(int rows, int tokens) {
        return Math.max(2 * (rows + 2 * tokens) * MM_HALF_STRIDE / 2, tokens * (rows + MM_FLOAT_PAD));
    }

    /**
     * Threadgroup memory (floats) of mla_flash_attention: the staged operands of a step (queries as hi and lo halves
     * and keys of the scores, or the transposed values of the weighted sum), the block's scores, its
     * probabilities (hi and lo halves), the 8 x 8 diagonal matrices that rescale the sums and the queries' 1/sum.
     */
    public static int faMemoryFloats() {
        return faStageFloats() + FA_KEYS * (FA_QUERIES + 4) + FA_QUERIES * (FA_KEYS + 8) + FA_QUERIES * 8 + FA_QUERIES;
    }

    /**
     * Floats of mla_flash_attention's staging area: a step's queries (hi and lo halves) and keys (the cache's halves;
     * rows padded by 8 halves, as {@link #MM_HALF_STRIDE}), or a step's values transposed (a row of {@link #FA_KEYS}
     * keys per value, halves).
     */
    public static int faStageFloats() {
        int scores = (2 * FA_QUERIES + FA_KEYS) * (FA_DEPTH + 8);
        int values = FA_VALUES * (FA_KEYS + 8);
        return Math.max(scores, values) / 2;
    }

    /**
     * Column parts of a mat_mat of one matrix of {@code rows} x {@code cols} over {@code tokens}: doubled while the
     * dispatch has fewer than {@link #MM_MIN_THREADGROUPS} threadgroups and the parts stay whole multiples of
     * {@link #MM_PART_COLUMNS} columns.
     */
    public static int mmParts(int tokens, int rows, int cols) {
        long groups = (long) ((tokens + MM_TOKENS - 1) / MM_TOKENS) * ((rows + MM_ROWS - 1) / MM_ROWS);
        int parts = 1;
        while (groups * parts < MM_MIN_THREADGROUPS && cols % (2 * parts * MM_PART_COLUMNS) == 0) {
            parts *= 2;
        }
        return parts;
    }

    /** The constants as the kernels see them: {@code GLIMMER_<NAME>} macros. */
    public static Map<String, Integer> defines() {
        Map<String, Integer> d = new LinkedHashMap<>();
        d.put("GLIMMER_SIMD_WIDTH", SIMD_WIDTH);
        d.put("GLIMMER_PREVIOUS_GREEDY", PREVIOUS_GREEDY);
        d.put("GLIMMER_MV_ROWS_PER_SIMDGROUP", MV_ROWS_PER_SIMDGROUP);
        d.put("GLIMMER_MV_SIMDGROUPS", MV_SIMDGROUPS);
        d.put("GLIMMER_WIDE_SIMDGROUPS", WIDE_SIMDGROUPS);
        d.put("GLIMMER_HEAD_SIMDGROUPS", HEAD_SIMDGROUPS);
        d.put("GLIMMER_CHUNK", CHUNK);
        d.put("GLIMMER_MM_TOKENS", MM_TOKENS);
        d.put("GLIMMER_MM_ROWS", MM_ROWS);
        d.put("GLIMMER_EXPERT_TOKENS", EXPERT_TOKENS);
        d.put("GLIMMER_EXPERT_ROWS", EXPERT_ROWS);
        d.put("GLIMMER_MM_SIMDGROUPS", MM_SIMDGROUPS);
        d.put("GLIMMER_MM_SIMDGROUP_ROWS", MM_SIMDGROUP_ROWS);
        d.put("GLIMMER_MM_SIMDGROUP_TOKENS", MM_SIMDGROUP_TOKENS);
        d.put("GLIMMER_MM_FLOAT_TOKENS", MM_FLOAT_TOKENS);
        d.put("GLIMMER_MM_DEPTH", MM_DEPTH);
        d.put("GLIMMER_MM_HALF_STRIDE", MM_HALF_STRIDE);
        d.put("GLIMMER_MM_FLOAT_PAD", MM_FLOAT_PAD);
        d.put("GLIMMER_ATTENTION_MIN_ROWS", ATTENTION_MIN_ROWS);
        d.put("GLIMMER_FA_QUERIES", FA_QUERIES);
        d.put("GLIMMER_FA_SIMDGROUPS", FA_SIMDGROUPS);
        d.put("GLIMMER_FA_KEYS", FA_KEYS);
        d.put("GLIMMER_FA_DEPTH", FA_DEPTH);
        d.put("GLIMMER_FA_VALUES", FA_VALUES);
        d.put("GLIMMER_FA_MAX_LATENT", FA_MAX_LATENT);
        d.put("GLIMMER_FA_SPLITS", FA_SPLITS);
        d.put("GLIMMER_FA_SPLIT_KEYS", FA_SPLIT_KEYS);
        d.put("GLIMMER_FA_STAGE_FLOATS", faStageFloats());
        return d;
    }
}
