package dev.glimmer.engine.grammar;

import dev.glimmer.engine.tokenizer.TokenType;
import dev.glimmer.engine.tokenizer.Tokenizer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * A model's vocabulary arranged for computing token masks: the text tokens' bytes as a trie, laid
 * out in preorder (children in no particular order) in flat arrays, so that a walk reads each shared prefix once and skips the whole
 * subtree of a prefix the grammar refuses; besides it the end-of-generation tokens and the other
 * control tokens. Built once per model and shared (immutable).
 */
public final class TokenTrie {
    final int vocabularySize;
    /** Per trie node (preorder): its byte, its depth (1 for a first byte) and the index after its subtree. */
    final byte[] label;

    final int[] depth;
    final int[] subtreeEnd;
    /**
     * The bytes that occur below node i (in the rest of the tokens that go through it), 256 bits at
     * {@code below[4i .. 4i+4)}: where the grammar loops on all of them (inside a JSON string), the
     * whole subtree is allowed without walking it.
     */
    final long[] below;
    /** The tokens whose bytes end at node i: {@code tokens[tokensFrom[i] .. tokensFrom[i+1])}. */
    final int[] tokensFrom;

    final int[] tokens;
    final int maxDepth;
    final int[] endOfGeneration;
    /** Non-end-of-generation control tokens and their texts. */
    final int[] controlIds;

    final byte[][] controlBytes;
    /** Every token that is not end-of-generation (the mask while the model thinks). */
    final long[] allButEndOfGeneration;

    private final long[] endOfGenerationMask;
    /** Each token's bytes, as the server's detokenizer prints them (control tokens as their text). */
    private final byte[][] pieces;

    private TokenTrie(Tokenizer tokenizer) {
        vocabularySize = tokenizer.vocabularySize();
        List<byte[]> texts = new ArrayList<>();
        List<Integer> ids = new ArrayList<>();
        List<Integer> eog = new ArrayList<>();
        List<Integer> controls = new ArrayList<>();
        allButEndOfGeneration = new long[words(vocabularySize)];
        endOfGenerationMask = new long[words(vocabularySize)];
        pieces = new byte[vocabularySize][];
        long totalBytes = 0;
        for (int id = 0; id < vocabularySize; id++) {
            byte[] bytes = tokenizer.piece(id, true);
            pieces[id] = bytes;
            TokenType type = tokenizer.tokenType(id);
            if (tokenizer.isEndOfGeneration(id)) {
                eog.add(id);
                set(endOfGenerationMask, id);
                continue;
            }
            if (bytes.length == 0 || type == TokenType.UNKNOWN) {
                continue; // prints nothing (or a placeholder): never a step forward
            }
            set(allButEndOfGeneration, id);
            if (type == TokenType.CONTROL) {
                controls.add(id);
            } else {
                texts.add(bytes);
                ids.add(id);
                totalBytes += bytes.length;
            }
        }
        // Insert every token into a linked trie (children found through a hash of parent and byte),
        // then lay it out in preorder.
        int capacity = (int) Math.min(Integer.MAX_VALUE - 8, totalBytes + 1);
        byte[] linkedLabel = new byte[capacity];
        int[] firstChild = new int[capacity];
        int[] nextSibling = new int[capacity];
        int[] firstToken = new int[capacity];
        int[] nextToken = new int[texts.size()];
        Arrays.fill(firstChild, -1);
        Arrays.fill(firstToken, -1);
        int[] rootChild = new int[256];
        Arrays.fill(rootChild, -1);
        ChildTable children = new ChildTable(capacity);
        int created = 0;
        int deepest = 0;
        for (int k = 0; k < texts.size(); k++) {
            byte[] t = texts.get(k);
            int node = -1;
            for (int d = 0; d < t.length; d++) {
                int b = t[d] & 0xFF;
                int child = d == 0 ? rootChild[b] : children.get(node, b);
                if (child < 0) {
                    child = created++;
                    linkedLabel[child] = t[d];
                    if (d == 0) {
                        rootChild[b] = child;
                        nextSibling[child] = -1;
                    } else {
                        children.put(node, b, child);
                        nextSibling[child] = firstChild[node];
                        firstChild[node] = child;
                    }
                }
                node = child;
            }
            nextToken[k] = firstToken[node];
            firstToken[node] = k;
            deepest = Math.max(deepest, t.length);
        }

        int nodes = created;
        byte[] label = new byte[nodes];
        int[] depth = new int[nodes];
        int[] end = new int[nodes];
        int[] from = new int[nodes + 1];
        int[] tokenList = new int[texts.size()];
        int[] parent = new int[nodes];
        int listed = 0;
        int placed = 0;
        // Depth-first from the root's children; each stack entry is a linked node and its depth.
        int[] stackNode = new int[deepest + 2 + 256];
        int[] stackDepth = new int[stackNode.length];
        int[] open = new int[deepest + 2]; // open[d]: the preorder index of the node being filled at depth d
        int top = 0;
        for (int b = 255; b >= 0; b--) {
            if (rootChild[b] >= 0) {
                stackNode = push(stackNode, top, rootChild[b]);
                stackDepth = push(stackDepth, top, 1);
                top++;
            }
        }
        int lastDepth = 0;
        while (top > 0) {
            top--;
            int linked = stackNode[top];
            int d = stackDepth[top];
            // Nodes at this depth or deeper are complete: their subtrees end here.
            for (int closed = lastDepth; closed >= d; closed--) {
                end[open[closed]] = placed;
            }
            int index = placed++;
            label[index] = linkedLabel[linked];
            depth[index] = d;
            from[index] = listed;
            open[d] = index;
            lastDepth = d;
            for (int k = firstToken[linked]; k >= 0; k = nextToken[k]) {
                tokenList[listed++] = ids.get(k);
            }
            parent[index] = d == 1 ? -1 : open[d - 1];
            for (int c = firstChild[linked]; c >= 0; c = nextSibling[c]) {
                stackNode = push(stackNode, top, c);
                stackDepth = push(stackDepth, top, d + 1);
                top++;
            }
        }
        for (int closed = lastDepth; closed >= 1; closed--) {
            end[open[closed]] = placed;
        }
        from[nodes] = listed;
        // The bytes below a node: its children's bytes and theirs, gathered from the last node back.
        this.below = new long[4 * nodes];
        for (int i = nodes - 1; i >= 0; i--) {
            int p = parent[i];
            if (p >= 0) {
                int b = label[i] & 0xFF;
                below[4 * p + (b >>> 6)] |= 1L << b;
                for (int w = 0; w < 4; w++) {
                    below[4 * p + w] |= below[4 * i + w];
                }
            }
        }
        this.label = label;
        this.depth = depth;
        this.subtreeEnd = end;
        this.tokensFrom = from;
        this.tokens = tokenList;
        this.maxDepth = deepest;
        this.endOfGeneration = eog.stream().mapToInt(Integer::intValue).toArray();
        this.controlIds = controls.stream().mapToInt(Integer::intValue).toArray();
        this.controlBytes = new byte[controlIds.length][];
        for (int i = 0; i < controlIds.length; i++) {
            controlBytes[i] = pieces[controlIds[i]];
        }
    }

    public static TokenTrie of(Tokenizer tokenizer) {
        return new TokenTrie(tokenizer);
    }

    public int vocabularySize() {
        return vocabularySize;
    }

    /** Trie nodes (distinct token prefixes), for statistics. */
    public int nodeCount() {
        return label.length;
    }

    /** Open addressing from (parent node, byte) to the child node: no boxing for a million entries. */
    private static final class ChildTable {
        private final long[] keys;
        private final int[] values;
        private final int mask;

        ChildTable(int entries) {
            int size = Integer.highestOneBit(Math.max(16, entries) * 2 - 1) << 1;
            keys = new long[size];
            values = new int[size];
            mask = size - 1;
            Arrays.fill(keys, -1);
        }

        int get(int node, int b) {
            long key = (long) node << 8 | b;
            for (int i = slot(key); ; i = (i + 1) & mask) {
                if (keys[i] == key) {
                    return values[i];
                }
                if (keys[i] == -1) {
                    return -1;
                }
            }
        }

        void put(int node, int b, int child) {
            long key = (long) node << 8 | b;
            int i = slot(key);
            while (keys[i] != -1) {
                i = (i + 1) & mask;
            }
            keys[i] = key;
            values[i] = child;
        }

        private int slot(long key) {
            return (int) (key * 0x9E3779B97F4A7C15L >>> 40) & mask;
        }
    }

    private static int[] push(int[] stack, int at, int value) {
        int[] s = at < stack.length ? stack : Arrays.copyOf(stack, stack.length * 2);
        s[at] = value;
        return s;
    }

    byte[] piece(int token) {
        return pieces[token];
    }

    boolean isEndOfGeneration(int token) {
        return allows(endOfGenerationMask, token);
    }

    static int words(int bits) {
        return (bits + 63) >>> 6;
    }

    static void set(long[] mask, int token) {
        mask[token >>> 6] |= 1L << token;
    }

    /** Whether {@code token} is set in {@code mask} (a mask made by {@link TokenConstraint}). */
    public static boolean allows(long[] mask, int token) {
        return (mask[token >>> 6] & 1L << token) != 0;
    }
}
