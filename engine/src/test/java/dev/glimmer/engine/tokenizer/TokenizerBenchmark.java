package dev.glimmer.engine.tokenizer;

import dev.glimmer.engine.gguf.GgufMetadata;
import dev.glimmer.engine.gguf.GgufValue;
import dev.glimmer.engine.gguf.GgufValue.GgufArray;
import dev.glimmer.engine.gguf.GgufValueType;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Encoding 1 MB of English-like text with a vocabulary of the real model's size (about 150k tokens
 * and 320k merges), built synthetically and deterministically so that the benchmark needs no model
 * file. Run it with {@code mvn -o -pl engine -am -Pbenchmark test -DskipTests}.
 *
 * <ul>
 *   <li>{@code encodeWarm}: steady state, the word cache already filled by earlier calls;</li>
 *   <li>{@code encodeCold}: the first call on a fresh tokenizer (empty word cache).</li>
 * </ul>
 */
@Fork(
        value = 1,
        jvmArgsAppend = {"--add-modules", "jdk.incubator.vector", "-Xmx2g"})
@OutputTimeUnit(TimeUnit.MILLISECONDS)
public class TokenizerBenchmark {
    static final int VOCABULARY_SIZE = 150_000;
    static final int MERGES = 320_000;
    static final int TEXT_BYTES = 1 << 20;

    @State(Scope.Benchmark)
    public static class Warm {
        Tokenizer tokenizer;
        String text;

        @Setup(Level.Trial)
        public void setUp() {
            SyntheticVocabulary v = new SyntheticVocabulary(42);
            tokenizer = Tokenizer.fromMetadata(v.metadata());
            text = v.text(TEXT_BYTES);
        }
    }

    @State(Scope.Benchmark)
    public static class Cold {
        SyntheticVocabulary vocabulary;
        GgufMetadata metadata;
        Tokenizer tokenizer;
        String text;

        @Setup(Level.Trial)
        public void setUpVocabulary() {
            vocabulary = new SyntheticVocabulary(42);
            metadata = vocabulary.metadata();
            text = vocabulary.text(TEXT_BYTES);
        }

        @Setup(Level.Iteration)
        public void freshTokenizer() {
            tokenizer = Tokenizer.fromMetadata(metadata);
        }
    }

    @Benchmark
    @BenchmarkMode(Mode.AverageTime)
    @Warmup(iterations = 3, time = 2)
    @Measurement(iterations = 5, time = 2)
    public int[] encodeWarm(Warm state) {
        return state.tokenizer.encode(state.text, true);
    }

    @Benchmark
    @BenchmarkMode(Mode.SingleShotTime)
    @Warmup(iterations = 2)
    @Measurement(iterations = 5)
    public int[] encodeCold(Cold state) {
        return state.tokenizer.encode(state.text, true);
    }

    /**
     * A byte-level BPE vocabulary shaped like a real one: the 256 byte tokens, then tokens grown one
     * character at a time along English-like pseudo-words (with and without the leading space), then
     * random letter strings up to the target size, then extra merge rules that split existing tokens
     * differently (a real merge list has about twice as many rules as tokens).
     */
    static final class SyntheticVocabulary {
        private static final String[] SYLLABLES = {
            "th", "e", "an", "in", "er", "on", "re", "at", "en", "nd", "st", "or", "es", "te", "of", "ed", "is", "it",
            "al", "ar", "ing", "ion", "ent", "ly", "ou", "ch", "pre", "com", "pro", "con", "ver", "tion", "s", "a", "o",
            "i", "u", "str", "bl", "gr"
        };
        private static final char SPACE = ByteLevel.charOf(' ');

        private final Random random;
        private final List<String> tokens = new ArrayList<>();
        private final Set<String> tokenSet = new HashSet<>();
        private final List<String> merges = new ArrayList<>();
        private final Set<String> mergeSet = new HashSet<>();
        private final List<String> words = new ArrayList<>();

        SyntheticVocabulary(long seed) {
            random = new Random(seed);
            for (int b = 0; b < 256; b++) {
                addToken(String.valueOf(ByteLevel.charOf(b)));
            }
            Set<String> distinct = new HashSet<>();
            while (words.size() < 40_000) {
                StringBuilder w = new StringBuilder();
                int syllables = 1 + random.nextInt(4);
                for (int i = 0; i < syllables; i++) {
                    w.append(SYLLABLES[random.nextInt(SYLLABLES.length)]);
                }
                if (distinct.add(w.toString())) {
                    words.add(w.toString());
                }
            }
            // The most frequent 30k words (and their capitalised and spaced forms) are whole tokens.
            for (int i = 0; i < 30_000 && tokens.size() < VOCABULARY_SIZE; i++) {
                String w = words.get(i);
                grow(w);
                grow(SPACE + w);
                if (i < 5_000) {
                    grow(SPACE + Character.toUpperCase(w.charAt(0)) + w.substring(1));
                }
            }
            for (String punctuation : new String[] {".", ",", "'s", "." + SPACE, "," + SPACE}) {
                grow(punctuation);
            }
            while (tokens.size() < VOCABULARY_SIZE) {
                StringBuilder s = new StringBuilder(random.nextBoolean() ? String.valueOf(SPACE) : "");
                int length = 2 + random.nextInt(8);
                for (int i = 0; i < length; i++) {
                    s.append((char) ('a' + random.nextInt(26)));
                }
                grow(s.toString());
            }
            while (merges.size() < MERGES) {
                String t = tokens.get(256 + random.nextInt(tokens.size() - 256));
                if (t.length() < 3) {
                    continue;
                }
                int cut = 1 + random.nextInt(t.length() - 1);
                String left = t.substring(0, cut);
                String right = t.substring(cut);
                if (tokenSet.contains(left) && tokenSet.contains(right)) {
                    addMerge(left, right);
                }
            }
        }

        /** Adds the token and every prefix of it, each made by one merge of the previous prefix and a character. */
        private void grow(String token) {
            String current = token.substring(0, 1);
            for (int i = 1; i < token.length() && tokens.size() < VOCABULARY_SIZE; i++) {
                String next = String.valueOf(token.charAt(i));
                addMerge(current, next);
                current = current + next;
            }
        }

        private void addMerge(String left, String right) {
            if (mergeSet.add(left + " " + right)) {
                merges.add(left + " " + right);
                addToken(left + right);
            }
        }

        private void addToken(String token) {
            if (tokenSet.add(token)) {
                tokens.add(token);
            }
        }

        GgufMetadata metadata() {
            long[] types = new long[tokens.size()];
            java.util.Arrays.fill(types, TokenType.NORMAL.ggufId());
            Map<String, GgufValue> md = new LinkedHashMap<>();
            md.put("tokenizer.ggml.model", GgufValue.of("gpt2"));
            md.put("tokenizer.ggml.pre", GgufValue.of("glm4"));
            md.put("tokenizer.ggml.tokens", GgufValue.array(GgufArray.strings(tokens.toArray(String[]::new))));
            md.put("tokenizer.ggml.token_type", GgufValue.array(GgufArray.ints(GgufValueType.INT32, types)));
            md.put("tokenizer.ggml.merges", GgufValue.array(GgufArray.strings(merges.toArray(String[]::new))));
            return new GgufMetadata(md);
        }

        /**
         * English-like text: pseudo-words with a skewed frequency (a few very common, a long tail, some
         * not in the vocabulary), sentences with capitals, commas and full stops, numbers, paragraphs.
         */
        String text(int bytes) {
            Random r = new Random(7);
            StringBuilder sb = new StringBuilder(bytes + 100);
            boolean sentenceStart = true;
            while (sb.length() < bytes) {
                double u = r.nextDouble();
                String w = words.get((int) (u * u * u * words.size()));
                if (sentenceStart) {
                    w = Character.toUpperCase(w.charAt(0)) + w.substring(1);
                }
                sb.append(w);
                sentenceStart = false;
                int p = r.nextInt(100);
                if (p < 6) {
                    sb.append(". ");
                    sentenceStart = true;
                } else if (p < 11) {
                    sb.append(", ");
                } else if (p < 12) {
                    sb.append("'s ");
                } else if (p < 13) {
                    sb.append(' ').append(r.nextInt(100_000)).append(' ');
                } else if (p < 14) {
                    sb.append(".\n\n");
                    sentenceStart = true;
                } else {
                    sb.append(' ');
                }
            }
            sb.setLength(bytes);
            return sb.toString();
        }
    }

    /** Prints the synthetic vocabulary's sizes and a one-off timing, without JMH. */
    public static void main(String[] args) {
        SyntheticVocabulary v = new SyntheticVocabulary(42);
        GgufMetadata md = v.metadata();
        String text = v.text(TEXT_BYTES);
        long t0 = System.nanoTime();
        Tokenizer tokenizer = Tokenizer.fromMetadata(md);
        long t1 = System.nanoTime();
        int[] ids = tokenizer.encode(text, true);
        long t2 = System.nanoTime();
        tokenizer.encode(text, true);
        long t3 = System.nanoTime();
        System.out.printf(
                "vocabulary %d tokens, %d merges; load %.0f ms; 1 MB -> %d tokens: cold %.0f ms, warm %.0f ms%n",
                tokenizer.vocabularySize(),
                md.stringArray("tokenizer.ggml.merges").length,
                (t1 - t0) / 1e6,
                ids.length,
                (t2 - t1) / 1e6,
                (t3 - t2) / 1e6);
        if (!tokenizer.decode(ids, true).equals(text)) {
            throw new AssertionError("round trip failed");
        }
    }
}
