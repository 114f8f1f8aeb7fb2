/*
 * Writes a random graph as an in-neighbour CSR for `attngraph run --csr`:
 * N nodes, each with K distinct random sources (ascending), as int64 .npy
 * files indptr [N+1] and indices [N*K]. Usage:
 *   make_random_csr N K SEED INDPTR.npy INDICES.npy
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Writes a 1-D little-endian int64 .npy array (this tool runs on x86-64). */
static int write_i64(const char *path, const int64_t *x, int64_t n)
{
    char dict[128];
    int len = snprintf(dict, sizeof dict, "{'descr': '<i8', 'fortran_order': False, "
                       "'shape': (%lld,), }", (long long)n);
    int pad = (64 - (10 + len + 1) % 64) % 64;
    unsigned hl = (unsigned)(len + pad + 1);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    const unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, hl & 0xff, hl >> 8};
    fwrite(pre, 1, 10, f);
    fwrite(dict, 1, (size_t)len, f);
    for (int i = 0; i < pad; i++)
        fputc(' ', f);
    fputc('\n', f);
    fwrite(x, sizeof *x, (size_t)n, f);
    return fclose(f);
}

static int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: make_random_csr N K SEED INDPTR.npy INDICES.npy\n");
        return 2;
    }
    const int64_t N = atoll(argv[1]), K = atoll(argv[2]);
    uint64_t s = (uint64_t)atoll(argv[3]) * 0x9E3779B97F4A7C15ull + 1;
    if (N < 1 || K < 0 || K > N) {
        fprintf(stderr, "make_random_csr: need N >= 1 and 0 <= K <= N\n");
        return 2;
    }
    int64_t *indptr = malloc((size_t)(N + 1) * sizeof *indptr);
    int64_t *indices = malloc((size_t)(N * K + 1) * sizeof *indices);
    if (!indptr || !indices) {
        fprintf(stderr, "make_random_csr: out of memory\n");
        return 1;
    }
    for (int64_t i = 0; i <= N; i++)
        indptr[i] = i * K;
    for (int64_t i = 0; i < N; i++) {
        int64_t *row = indices + i * K;
        for (int64_t k = 0; k < K; k++) {
            int fresh;
            do {   /* xorshift64; redraw a repeated source */
                s ^= s << 13, s ^= s >> 7, s ^= s << 17;
                row[k] = (int64_t)(s % (uint64_t)N);
                fresh = 1;
                for (int64_t m = 0; m < k; m++)
                    fresh &= row[m] != row[k];
            } while (!fresh);
        }
        qsort(row, (size_t)K, sizeof *row, cmp_i64);
    }
    if (write_i64(argv[4], indptr, N + 1) || write_i64(argv[5], indices, N * K)) {
        perror("make_random_csr");
        return 1;
    }
    free(indptr);
    free(indices);
    return 0;
}
