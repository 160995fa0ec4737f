package dev.glimmer.engine.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.glimmer.engine.kv.KvCache;
import dev.glimmer.engine.kv.KvCacheType;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The prompt's attention in tiles of tokens: every output bit as each token alone gives it (a decode row), and close
 * to a float64 reference, at tile edges (a call of more tokens than a tile, a first position not a multiple of
 * anything) and in both cache types.
 */
class CpuAttentionTest {
    private static final int LAYERS = 2;
    private static final int HEADS = 3;
    private static final int VALUE_WIDTH = 40; // the latent part of a row: not a multiple of a 512-bit vector
    private static final int WIDTH = VALUE_WIDTH + 8; // and the rotary part
    private static final float SCALE = 0.2f;

    @ParameterizedTest
    @CsvSource({"F16, 0, 75", "F16, 333, 70", "F32, 1, 33", "F32, 600, 1"})
    void tilesGiveWhatEachTokenAloneGives(KvCacheType type, int firstPosition, int n) {
        Random random = new Random(firstPosition * 31L + n);
        int positions = firstPosition + n;
        try (KvCache cache = new KvCache(LAYERS, WIDTH, 1024, type)) {
            float[] row = new float[WIDTH];
            for (int layer = 0; layer < LAYERS; layer++) {
                for (int u = 0; u < positions; u++) {
                    for (int i = 0; i < WIDTH; i++) {
                        row[i] = (float) random.nextGaussian();
                    }
                    cache.write(layer, u, row, 0);
                }
            }
            float[] q = new float[n * HEADS * WIDTH];
            for (int i = 0; i < q.length; i++) {
                q[i] = (float) random.nextGaussian();
            }
            CpuAttention attention = new CpuAttention(WorkerPool.shared(2));
            int layer = 1;
            float[] tiled = new float[n * HEADS * VALUE_WIDTH];
            attention.compute(cache, layer, q, n, firstPosition, HEADS, SCALE, VALUE_WIDTH, tiled);

            float[] alone = new float[n * HEADS * VALUE_WIDTH];
            float[] qOne = new float[HEADS * WIDTH];
            float[] oOne = new float[HEADS * VALUE_WIDTH];
            for (int t = 0; t < n; t++) {
                System.arraycopy(q, t * HEADS * WIDTH, qOne, 0, qOne.length);
                attention.compute(cache, layer, qOne, 1, firstPosition + t, HEADS, SCALE, VALUE_WIDTH, oOne);
                System.arraycopy(oOne, 0, alone, t * HEADS * VALUE_WIDTH, oOne.length);
            }
            assertArrayEquals(alone, tiled, "tiled outputs differ from the tokens' own");

            double[] reference = reference(cache, layer, q, n, firstPosition);
            double error = 0;
            double norm = 0;
            for (int i = 0; i < reference.length; i++) {
                error += (tiled[i] - reference[i]) * (tiled[i] - reference[i]);
                norm += reference[i] * reference[i];
            }
            assertTrue(error / norm < 1e-10, "normalized squared error " + error / norm);
        }
    }

    /** Softmax attention in float64 over the cache's rows as stored (so F16 rounding is not counted as error). */
    private static double[] reference(KvCache cache, int layer, float[] q, int n, int firstPosition) {
        double[] out = new double[n * HEADS * VALUE_WIDTH];
        float[] row = new float[WIDTH];
        short[] halves = new short[WIDTH];
        for (int t = 0; t < n; t++) {
            int length = firstPosition + t + 1;
            for (int h = 0; h < HEADS; h++) {
                double[] p = new double[length];
                for (int u = 0; u < length; u++) {
                    cache.read(layer, u, 0, WIDTH, row, 0, halves);
                    double dot = 0;
                    for (int i = 0; i < WIDTH; i++) {
                        dot += (double) q[(t * HEADS + h) * WIDTH + i] * row[i];
                    }
                    p[u] = dot * SCALE;
                }
                double max = Arrays.stream(p).max().orElseThrow();
                double sum = 0;
                for (int u = 0; u < length; u++) {
                    p[u] = Math.exp(p[u] - max);
                    sum += p[u];
                }
                for (int u = 0; u < length; u++) {
                    cache.read(layer, u, 0, WIDTH, row, 0, halves);
                    for (int i = 0; i < VALUE_WIDTH; i++) {
                        out[(t * HEADS + h) * VALUE_WIDTH + i] += p[u] / sum * row[i];
                    }
                }
            }
        }
        return out;
    }
}
