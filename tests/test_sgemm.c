/*
 * The library's dense product (ag_i_sgemm) against a chain of scalar
 * multiply-adds written here: fmaf per step for the AVX2 and AVX-512 variants
 * (so both give exactly these bits: the same on every CPU with FMA), a product
 * then a sum for the baseline; every tail of rows, columns and k, both layouts
 * of each operand, beta 0 and 1, and C's padding left alone. The chain itself
 * is held to a double-precision sum.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "kernels/simd.h"

/* Entry (i, j) as the library promises it: from C (beta) or 0, one step per p. */
static float chain(int64_t k, const float *A, int64_t a_rs, int64_t a_cs, const float *B,
                   int64_t b_rs, int64_t b_cs, float c, int fused, int64_t i, int64_t j)
{
    for (int64_t p = 0; p < k; p++) {
        const float a = A[i * a_rs + p * a_cs], b = B[p * b_rs + j * b_cs];
        if (fused) {
            c = fmaf(a, b, c);
        } else {
            volatile float t = a * b;   /* rounded on its own: no fusing here */
            c = c + t;
        }
    }
    return c;
}

/* past every cut: rows (strips of 6 or 12, blocks of 96 rows read B in place),
   columns (panels of 8, 16 or 32; blocks of 256), k (blocks of 256) */
static const int64_t ms[] = {1, 5, 12, 13, 100}, ns[] = {1, 7, 16, 31, 32, 33, 300};
static const int64_t ks[] = {0, 1, 3, 255, 256, 257, 300};

START_TEST(sgemm_is_the_chain_of_multiply_adds)
{
    const ag_simd_level_t best = ag_i_simd_level();
    const int level = _i;
    if (level > (int)best)
        return;   /* the CPU does not run this variant */
    ag_i_simd_force(level);
    const int fused = level != AG_SIMD_BASE;
    enum { MAXM = 100, MAXN = 300, MAXK = 300, PAD = 3 };
    float *A = malloc(MAXM * MAXK * sizeof *A), *B = malloc(MAXK * MAXN * sizeof *B);
    float *C = malloc(MAXM * (MAXN + PAD) * sizeof *C), *C0 = malloc(MAXM * (MAXN + PAD) * sizeof *C0);
    fill_uniform(A, MAXM * MAXK, 3, 1.0f);
    fill_uniform(B, MAXK * MAXN, 4, 1.0f);
    fill_uniform(C0, MAXM * (MAXN + PAD), 5, 1.0f);
    int64_t cases = 0;
    for (size_t x = 0; x < sizeof ms / sizeof ms[0]; x++)
        for (size_t y = 0; y < sizeof ns / sizeof ns[0]; y++)
            for (size_t z = 0; z < sizeof ks / sizeof ks[0]; z++)
                for (int layout = 0; layout < 4; layout++)
                    for (int beta = 0; beta < 2; beta++) {
                        const int64_t m = ms[x], n = ns[y], k = ks[z], ldc = n + PAD;
                        /* A row-major [m, k] or stored as A^T [k, m]; B [k, n] or B^T [n, k] */
                        const int64_t a_rs = layout & 1 ? 1 : k, a_cs = layout & 1 ? m : 1;
                        const int64_t b_rs = layout & 2 ? 1 : n, b_cs = layout & 2 ? k : 1;
                        memcpy(C, C0, (size_t)(m * ldc) * sizeof *C);
                        ag_i_sgemm(m, n, k, A, a_rs, a_cs, B, b_rs, b_cs, beta, C, ldc);
                        for (int64_t i = 0; i < m; i++) {
                            for (int64_t j = 0; j < n; j++) {
                                const float start = beta ? C0[i * ldc + j] : 0.0f;
                                const float want = chain(k, A, a_rs, a_cs, B, b_rs, b_cs,
                                                         start, fused, i, j);
                                /* ck_assert only on a failure: Check writes a file
                                   at every assertion, and there are millions */
                                if (memcmp(&C[i * ldc + j], &want, sizeof want))
                                    ck_assert_msg(0, "%s: m %lld n %lld k %lld layout %d "
                                                  "beta %d: C[%lld, %lld] = %.9g, the chain "
                                                  "%.9g", ag_simd_isa(), (long long)m,
                                                  (long long)n, (long long)k, layout, beta,
                                                  (long long)i, (long long)j, C[i * ldc + j],
                                                  want);
                                double sum = start;   /* the chain is the sum, rounded */
                                for (int64_t p = 0; p < k; p++)
                                    sum += (double)A[i * a_rs + p * a_cs] *
                                           B[p * b_rs + j * b_cs];
                                if (!(fabs(want - sum) <= 1e-5 * (1 + (double)k)))
                                    ck_assert_msg(0, "the chain %.9g is not the sum %.9g", want,
                                                  sum);
                            }
                            for (int64_t j = n; j < ldc; j++)   /* the padding: untouched */
                                if (C[i * ldc + j] != C0[i * ldc + j])
                                    ck_assert_msg(0, "C[%lld, %lld] (padding) changed",
                                                  (long long)i, (long long)j);
                        }
                        cases++;
                    }
    ck_assert_int_eq(cases, 5 * 7 * 7 * 4 * 2);
    ag_i_simd_force(-1);
    free(A), free(B), free(C), free(C0);
}
END_TEST

Suite *sgemm_suite(void)
{
    Suite *s = suite_create("sgemm");
    TCase *tc = tcase_create("chain");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, sgemm_is_the_chain_of_multiply_adds, AG_SIMD_BASE,
                        AG_SIMD_AVX512 + 1);
    suite_add_tcase(s, tc);
    return s;
}
