/*
 * NeonKernelTest's program: runs one variant of the native Q4_0 kernel (built for another processor and
 * run under an emulator) on the inputs the test writes, and writes its results back.
 *
 *   q4_0_kernel_main IN OUT
 *   IN:  int32 rows, cols, n; rows Q4_0 rows of cols values; n activation rows of cols floats
 *   OUT: n * rows floats, out[j * rows + r] = weight row r · activation row j
 * Exit 3 when this processor does not run the variant (glimmer_cpu_variants).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int32_t glimmer_cpu_variants(void);
void glimmer_q4_0_activations(const float *x, int32_t cols, int8_t *xq, int32_t *bias, float *xd, int64_t row);
void glimmer_q4_0_matmul_neon_dotprod(const uint8_t *w, int64_t row_bytes, int32_t blocks, int32_t row_from, int32_t row_to,
                                      const int8_t *xq, const int32_t *bias, const float *xd,
                                      const int32_t *x_rows, int32_t n, float *out, int64_t out_offset, int32_t out_stride);

#define NEON_DOTPROD 3

static void read_exactly(FILE *in, void *to, size_t bytes) {
    if (fread(to, 1, bytes, in) != bytes) {
        fprintf(stderr, "short input\n");
        exit(2);
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: q4_0_kernel_main IN OUT\n");
        return 2;
    }
    if (!(glimmer_cpu_variants() & 1 << NEON_DOTPROD)) {
        fprintf(stderr, "this processor lacks the dot-product instructions\n");
        return 3;
    }
    FILE *in = fopen(argv[1], "rb");
    if (in == NULL) {
        perror(argv[1]);
        return 2;
    }
    int32_t header[3];
    read_exactly(in, header, sizeof header);
    int32_t rows = header[0], cols = header[1], n = header[2];
    size_t row_bytes = (size_t) cols / 32 * 18;
    uint8_t *w = malloc(rows * row_bytes);
    float *x = malloc((size_t) n * cols * sizeof(float));
    int8_t *xq = malloc((size_t) n * cols);
    int32_t *bias = malloc((size_t) n * cols / 8 * sizeof(int32_t));
    float *xd = malloc((size_t) n * cols / 8 * sizeof(float));
    int32_t *x_rows = malloc((size_t) n * sizeof(int32_t));
    float *out = malloc((size_t) n * rows * sizeof(float));
    read_exactly(in, w, rows * row_bytes);
    read_exactly(in, x, (size_t) n * cols * sizeof(float));
    fclose(in);
    for (int32_t t = 0; t < n; t++) {
        glimmer_q4_0_activations(x + (size_t) t * cols, cols, xq, bias, xd, t);
        x_rows[t] = t;
    }
    glimmer_q4_0_matmul_neon_dotprod(w, (int64_t) row_bytes, cols / 32, 0, rows, xq, bias, xd, x_rows, n, out, 0, rows);
    FILE *o = fopen(argv[2], "wb");
    if (o == NULL || fwrite(out, sizeof(float), (size_t) n * rows, o) != (size_t) n * rows || fclose(o) != 0) {
        perror(argv[2]);
        return 2;
    }
    return 0;
}
