package dev.glimmer.engine.grammar;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.glimmer.engine.chat.ToolCallGrammar;
import dev.glimmer.engine.chat.ToolSpec;
import dev.glimmer.engine.gguf.GgufMetadata;
import dev.glimmer.engine.sampling.Sampler;
import dev.glimmer.engine.sampling.SamplingParams;
import dev.glimmer.engine.synth.SynthModel;
import dev.glimmer.engine.synth.SynthPreset;
import dev.glimmer.engine.synth.SynthWeightType;
import dev.glimmer.engine.tokenizer.Tokenizer;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What constrained decoding adds to each generated token on the full model's vocabulary (the
 * {@code full} synth preset's 154,880 tokens, tokenizer only: no weights needed). Each operation
 * generates {@value #TOKENS} tokens from random logits, as a sampler at temperature 1 picks them,
 * with a fresh constraint (every request compiles its own, so nothing is cached from the last one):
 * {@code constrained} minus {@code unconstrained} is the cost of the masks per token, to compare
 * with a CPU decode step of the full model (~100 ms here). {@code firstMaskInsideAString} is the
 * worst single step: a state never met, where almost every token is allowed and the whole trie is
 * walked. Run it with
 * {@code mvn -o -pl engine -am -Pbenchmark test -DskipTests -Dbenchmark=ConstrainedDecodingBenchmark}.
 */
@Fork(
        value = 1,
        jvmArgsAppend = {"--add-modules", "jdk.incubator.vector", "-Xmx2g"})
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class ConstrainedDecodingBenchmark {
    static final int TOKENS = 128;
    static final ObjectMapper JSON = new ObjectMapper();

    @State(Scope.Benchmark)
    public static class Vocabulary {
        Tokenizer tokenizer;
        TokenTrie trie;
        float[][] logits;

        @Setup(Level.Trial)
        public void setUp() {
            SynthModel full = SynthModel.of(SynthPreset.FULL, SynthWeightType.Q4_0, 1);
            tokenizer = Tokenizer.fromMetadata(new GgufMetadata(full.metadata()));
            long start = System.nanoTime();
            trie = TokenTrie.of(tokenizer);
            System.out.printf(
                    "%n%d tokens, trie of %d nodes built in %.0f ms%n",
                    trie.vocabularySize(), trie.nodeCount(), (System.nanoTime() - start) / 1e6);
            Random random = new Random(7);
            logits = new float[16][tokenizer.vocabularySize()];
            for (float[] row : logits) {
                for (int i = 0; i < row.length; i++) {
                    row[i] = (float) random.nextGaussian() * 3;
                }
            }
        }
    }

    @State(Scope.Benchmark)
    public static class Grammar {
        @Param({"person", "json_object", "tool_call"})
        String kind;

        OutputGrammar grammar;

        @Setup(Level.Trial)
        public void setUp() throws Exception {
            grammar = switch (kind) {
                case "person" -> new OutputGrammar(JsonSchemaGrammar.forSchema(JSON.readTree("""
                        {"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,
                        "maximum":150},"email":{"type":"string","pattern":"^[a-z]+@[a-z]+\\\\.com$"},"tags":{"type":"array",
                        "items":{"enum":["a","b","c"]}}},"required":["name","age","email","tags"]}""")), false, Set.of());
                case "json_object" -> new OutputGrammar(JsonSchemaGrammar.anyObject(), false, Set.of());
                default ->
                    ToolCallGrammar.forced(
                            List.of(new ToolSpec("search", JSON.readTree("""
                        {"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer","minimum":1,
                        "maximum":50}},"required":["query","limit"]}"""), JSON.createObjectNode())), false);
            };
        }
    }

    private static SamplingParams sampling() {
        return SamplingParams.defaults().withTemperature(1).withSeed(11);
    }

    @Benchmark
    @OperationsPerInvocation(TOKENS)
    public int unconstrained(Vocabulary v) {
        Sampler sampler = new Sampler(sampling(), v.tokenizer.vocabularySize());
        int sum = 0;
        for (int i = 0; i < TOKENS; i++) {
            sum += sampler.sample(v.logits[i & 15]);
        }
        return sum;
    }

    @Benchmark
    @OperationsPerInvocation(TOKENS)
    public int constrained(Vocabulary v, Grammar g) {
        Sampler sampler = new Sampler(sampling(), v.tokenizer.vocabularySize());
        TokenConstraint constraint = new TokenConstraint(g.grammar, v.trie);
        int sum = 0;
        for (int i = 0; i < TOKENS; i++) {
            int token = sampler.sample(v.logits[i & 15], constraint.allowed(TOKENS - i + 1000));
            if (v.tokenizer.isEndOfGeneration(token)) {
                constraint = new TokenConstraint(g.grammar, v.trie); // the next request
                continue;
            }
            constraint.accept(token);
            sum += token;
        }
        return sum;
    }

    @Benchmark
    public long[] firstMaskInsideAString(Vocabulary v) {
        TokenConstraint constraint =
                new TokenConstraint(new OutputGrammar(JsonSchemaGrammar.anyObject(), false, Set.of()), v.trie);
        for (int t : v.tokenizer.encode("{\"note\": \"a", false)) {
            constraint.accept(t);
        }
        return constraint.allowed(1000);
    }
}
