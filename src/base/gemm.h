/*
 * Dense products whose every bit is the same for any thread count, process
 * count and CPU with FMA.
 *
 * Each product is the library's own (ag_i_sgemm, base/sgemm.c): every entry
 * one chain of multiply-adds in a fixed order, so its bits depend on nothing
 * but the values (OpenBLAS's depended on its thread count and on the kernels
 * it picked when it loaded: SSE3 ones on an Emerald Rapids). The work is cut
 * into pieces fixed by the sizes alone: rows in blocks of AG_GEMM_BLOCK
 * spread over the OpenMP team. Reductions over rows (weight gradients, A^T B)
 * go in chunks of AG_GEMM_CHUNK rows into per-chunk partials that are added
 * in chunk order (so that the MPI layer's processes, each holding chunks,
 * add them as one process does). Matrices are row-major float.
 */
#ifndef AG_GEMM_H
#define AG_GEMM_H

#include <stdint.h>

#include "attngraph.h"

#define AG_GEMM_BLOCK ((int64_t)512)
#define AG_GEMM_CHUNK ((int64_t)1024)

/*
 * C [m, n] (row stride ldc) = (beta ? C : 0) + A B on this thread, A(i, p) at
 * A[i * a_rs + p * a_cs] and B(p, j) at B[p * b_rs + j * b_cs]: each entry one
 * chain of multiply-adds over p in order from C or 0 (base/sgemm.c), so its
 * bits depend on the sizes and values only; fused on the AVX2 and AVX-512
 * variants, which then agree bit for bit on every CPU.
 */
void ag_i_sgemm(int64_t m, int64_t n, int64_t k, const float *A, int64_t a_rs, int64_t a_cs,
                const float *B, int64_t b_rs, int64_t b_cs, int beta, float *C, int64_t ldc);

/* Y [N, out] = beta Y + X [N, in] W^T, with W [out, in] (a projection). */
void ag_i_gemm_xwt(float *Y, const float *X, const float *W, int64_t N, int64_t in,
                   int64_t out, float beta);

/* Y [N, out] = beta Y + X [N, in] W, with W [in, out] (a projection's input gradient). */
void ag_i_gemm_xw(float *Y, const float *X, const float *W, int64_t N, int64_t in,
                  int64_t out, float beta);

/* G [a, b] += A^T B, with A [N, a] and B [N, b] (a weight gradient: a sum over rows). */
int ag_i_gemm_atb(float *G, const float *A, const float *B, int64_t N, int64_t a, int64_t b,
                  ag_error_t *err);

/* Per-node projections, W [N, out, in]: Y_i = W_i x_i. */
void ag_i_project_per_node(float *Y, const float *X, const float *W, int64_t N, int64_t in,
                           int64_t out);

/* Their backward: dX_i += W_i^T dy_i and, when dW is not NULL, dW_i += dy_i x_i^T. */
void ag_i_project_per_node_backward(float *dX, float *dW, const float *dY, const float *X,
                                    const float *W, int64_t N, int64_t in, int64_t out);

/*
 * out[0..width) = the sum over rows 0..N-1 of what fn adds into a zeroed
 * partial for rows lo..hi-1, taken in chunks of AG_GEMM_CHUNK rows (in
 * parallel) and added in chunk order, in double: the same bits for any thread
 * count. work: about the operations of all rows (decides threading).
 */
typedef void (*ag_i_rows_fn)(int64_t lo, int64_t hi, double *partial, void *ctx);
int ag_i_sum_rows(int64_t N, int64_t width, int64_t work, ag_i_rows_fn fn, void *ctx,
                  double *out, ag_error_t *err);

/*
 * Sums over rows split among processes (the MPI layer's training; no MPI
 * here): the rows given are this process's part of the whole, starting on a
 * chunk boundary, and a reducer adds every process's per-chunk partials in
 * the whole's chunk order, which is the one-process sum bit for bit.
 */
typedef struct ag_i_reducer ag_i_reducer_t;
struct ag_i_reducer {
    /* chunks -1 (part NULL): an allocation on this process failed (err and
       ag_alloc_status say how); the reducer must still take part, and return
       the failure on every process */
    /* G[0..width) += the partials [chunks, width] of every process, chunk by chunk */
    int (*add_f)(const ag_i_reducer_t *r, float *G, const float *part, int64_t chunks,
                 int64_t width, ag_error_t *err);
    /* out[0..width) = 0 + the partials of every process, chunk by chunk */
    int (*add_d)(const ag_i_reducer_t *r, double *out, const double *part, int64_t chunks,
                 int64_t width, ag_error_t *err);
    /* *n = the sum of *n over the processes */
    int (*count)(const ag_i_reducer_t *r, int64_t *n, ag_error_t *err);
    void *ctx;
    /* the sum's rows per row of the parts (0 or 1: the parts' rows; a per-node
       array of rows of HD*D elements summed element by element: HD*D) */
    int64_t per_row;
};

/* An allocation failed before a sum over rows with r (NULL: none): the
   reducer still runs, so that every process hears of the failure; returns its
   status (ag_alloc_status's, on every process). */
int ag_i_reducer_failed(const ag_i_reducer_t *r, int64_t width, ag_error_t *err);

/* ag_i_gemm_atb and ag_i_sum_rows over this process's rows with r (NULL: the
   plain calls). */
int ag_i_gemm_atb_r(const ag_i_reducer_t *r, float *G, const float *A, const float *B,
                    int64_t N, int64_t a, int64_t b, ag_error_t *err);
int ag_i_sum_rows_r(const ag_i_reducer_t *r, int64_t N, int64_t width, int64_t work,
                    ag_i_rows_fn fn, void *ctx, double *out, ag_error_t *err);
/* ag_i_gemm_atb_r where only rows rows[0..m) (ascending) of the N are not
   zero, A [m, a] and B [m, b] holding those rows alone: each chunk's partial
   is its own rows' chain, and a zero row adds nothing to a chain, so G gets
   the bits of the whole product (a language model's head when an example set
   scores a few tokens). */
int ag_i_gemm_atb_rows_r(const ag_i_reducer_t *r, float *G, const float *A, const float *B,
                         const int64_t *rows, int64_t m, int64_t N, int64_t a, int64_t b,
                         ag_error_t *err);

/* out[0..width) = the column sums of Y [N, width] (a bias's gradient), as
   ag_i_sum_rows_r sums them (r NULL: one process). */
int ag_i_sum_columns_r(const ag_i_reducer_t *r, const float *Y, int64_t N, int64_t width,
                       double *out, ag_error_t *err);

#endif
