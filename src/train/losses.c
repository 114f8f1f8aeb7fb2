/*
 * Losses on the final states, restricted to a node mask: mean squared error
 * against targets, and cross-entropy over C classes through a linear readout.
 * Per-row work runs in parallel; every sum over rows goes in fixed chunks
 * (gemm.c), so losses and gradients are the same bits for any thread count.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/train.h"

static int64_t mask_count(const uint8_t *mask, int64_t N)
{
    int64_t n = 0;
    for (int64_t i = 0; i < N; i++)
        n += !mask || mask[i];
    return n;
}

/* ---- mean squared error ---- */

typedef struct {
    const float *X, *Y;
    const uint8_t *mask;
    int64_t D;
} mse_t;

static void mse_rows(int64_t lo, int64_t hi, double *partial, void *ctx)
{
    const mse_t *m = ctx;
    for (int64_t i = lo; i < hi; i++)
        for (int64_t c = 0; (!m->mask || m->mask[i]) && c < m->D; c++) {
            const double e = (double)m->X[i * m->D + c] - m->Y[i * m->D + c];
            partial[0] += e * e;
        }
}

int ag_loss_mse(const float *X, const float *Y, int64_t N, int64_t D, const uint8_t *mask,
                double *loss, float *dX, ag_error_t *err)
{
    return ag_i_loss_mse_r(NULL, X, Y, N, D, mask, loss, dX, err);
}

int ag_i_loss_mse_r(const ag_i_reducer_t *r, const float *X, const float *Y, int64_t N,
                    int64_t D, const uint8_t *mask, double *loss, float *dX, ag_error_t *err)
{
    /* a process's part may have no rows; the whole may not */
    if ((!r && (!X || !Y || N <= 0)) || N < 0 || D <= 0)
        return ag_fail(err, AG_EINVAL, "mse: %s [%lld, %lld]; expected X and targets of at "
                       "least one row and column", X && Y ? "states" : "no states or targets",
                       (long long)N, (long long)D);
    int64_t rows = mask_count(mask, N);
    int rc = r ? r->count(r, &rows, err) : AG_OK;
    if (rc)
        return rc;
    if (rows == 0)
        return ag_fail(err, AG_EINVAL, "mse: the mask selects none of the %lld nodes",
                       (long long)N);
    const double scale = 1.0 / ((double)rows * (double)D);
    if (loss) {
        mse_t ctx = {X, Y, mask, D};
        double sum;
        rc = ag_i_sum_rows_r(r, N, 1, N * D, mse_rows, &ctx, &sum, err);
        if (rc)
            return rc;
        *loss = sum * scale;
    }
    if (dX) {
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (N * D >= AG_PARALLEL_MIN_WORK) schedule(static)
        for (int64_t i = 0; i < N; i++)
            for (int64_t c = 0; c < D; c++)
                dX[i * D + c] = !mask || mask[i]
                    ? (float)(2.0 * ((double)X[i * D + c] - Y[i * D + c]) * scale) : 0.0f;
    }
    return AG_OK;
}

/* ---- cross-entropy through a linear readout ---- */

typedef struct {
    float *logits;            /* [N, C] in; dL/dlogits out */
    const int64_t *labels;
    const uint8_t *mask;
    int64_t C, counted;
    int64_t *pred, *pred_counted;
    const int64_t *rows;      /* the logits' rows are these rows [m] alone (few_rows), or NULL */
    int64_t m;
} ce_t;

/* Row i's softmax: its loss term if counted (in double: the largest logit
   plus the log of the exponentials' sum), its argmax, and dL/dlogits
   (softmax - one-hot) / counted written over the logits (0 if not counted).
   The exponentials are float, once each (ag_i_exp_nonpositive, within 3e-7
   of exp), kept in the row for the gradient: with 8,192 classes they were
   most of a language model's step in libm's double exp. */
static void ce_rows(int64_t lo, int64_t hi, double *partial, void *ctx)
{
    const ce_t *s = ctx;
    const int64_t C = s->C;
    const int64_t k0 = s->rows ? ag_i_count_below(s->rows, s->m, lo) : lo;
    const int64_t k1 = s->rows ? ag_i_count_below(s->rows, s->m, hi) : hi;
    for (int64_t k = k0; k < k1; k++) {
        const int64_t i = s->rows ? s->rows[k] : k;
        float *z = s->logits + k * C;
        const int64_t y = s->labels[i];
        const int counted = y >= 0 && (!s->mask || s->mask[i]);
        int64_t best = 0;
        float mx = z[0];
        if (counted || s->pred) {   /* the largest (a reduction that vectorizes), then its first place */
#if !defined(__clang__)   /* clang 14 cannot vectorize it and says so (an error under -Werror) */
#pragma omp simd reduction(max : mx)
#endif
            for (int64_t c = 1; c < C; c++)
                mx = z[c] > mx ? z[c] : mx;
            while (best < C && z[best] != mx)
                best++;
            best = best < C ? best : 0;   /* no match (NaN logits): the first */
        }
        if (s->pred)
            s->pred[i] = best;
        if (!counted) {   /* (its logits may be unmade: see few_rows) */
            memset(z, 0, (size_t)C * sizeof *z);
            continue;
        }
        if (s->pred_counted)
            s->pred_counted[i] = best;
        mx = z[best];
        const float zy = z[y];
        double sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int64_t c = 0; c < C; c++) {   /* the largest (and its ties) exactly 1 */
            const float e = ag_i_exp_nonpositive(z[c] - mx);
            z[c] = z[c] == mx ? 1.0f : e;
            sum += (double)z[c];
        }
        partial[0] += (double)mx + log(sum) - (double)zy;
        partial[1] += best == y;
        const float scale = (float)(1.0 / (sum * (double)s->counted)),
                    hit = (float)(1.0 / (double)s->counted);
#pragma omp simd
        for (int64_t c = 0; c < C; c++)
            z[c] = z[c] * scale;
        z[y] -= hit;
    }
}

static int ce_check(const ag_i_reducer_t *red, const float *X, int64_t N, int64_t D,
                    const float *Wr, int64_t C, const int64_t *labels, const uint8_t *mask,
                    int64_t *counted, ag_error_t *err)
{
    if (!red && (!X || !labels))
        return ag_fail(err, AG_EINVAL, "cross-entropy: states and labels are required");
    if (!Wr && D != C)
        return ag_fail(err, AG_EINVAL, "cross-entropy: no readout, so the states are the "
                       "logits: width %lld; expected the %lld classes", (long long)D,
                       (long long)C);
    if ((!red && N <= 0) || N < 0 || D <= 0 || C <= 0)
        return ag_fail(err, AG_EINVAL, "cross-entropy: %lld nodes of width %lld, %lld "
                       "classes; expected each >= 1", (long long)N, (long long)D, (long long)C);
    if (D > INT32_MAX || C > INT32_MAX)
        return ag_fail(err, AG_ELIMIT, "cross-entropy: widths beyond 2^31 are not supported "
                       "by BLAS");
    *counted = 0;
    for (int64_t i = 0; i < N; i++) {
        if (labels[i] < -1 || labels[i] >= C)
            return ag_fail(err, AG_EINVAL, "cross-entropy: node %lld has label %lld; expected "
                           "0..%lld, or -1 for none", (long long)i, (long long)labels[i],
                           (long long)(C - 1));
        *counted += labels[i] >= 0 && (!mask || mask[i]);
    }
    int rc = red ? red->count(red, counted, err) : AG_OK;
    if (rc)
        return rc;
    if (*counted == 0)
        return ag_fail(err, AG_EINVAL, "cross-entropy: no node is both in the mask and "
                       "labelled");
    return AG_OK;
}

int ag_loss_cross_entropy(const float *X, int64_t N, int64_t D, const ag_cross_entropy_t *ce,
                          ag_cross_entropy_out_t *out, ag_error_t *err)
{
    if (!ce || !out)
        return ag_fail(err, AG_EINVAL, "cross-entropy: no %s; expected the readout and labels "
                       "(ag_cross_entropy_t) and where the results go (ag_cross_entropy_out_t)",
                       !ce ? "readout and labels" : "results");
    return ag_i_loss_cross_entropy_r(NULL, X, N, D, ce, out, err);
}

/* The rows that count, when they are few (below half) and neither the
   argmax of every row nor a bias's gradient is wanted: an example set scores
   a few tokens of each sequence. Their indices into *rows (malloc'ed), or 0
   rows (NULL: every row is made). */
static int64_t few_rows(int64_t **rows, int64_t N, const int64_t *labels, const uint8_t *mask,
                        const ag_cross_entropy_out_t *out)
{
    *rows = NULL;
    int64_t m = 0;
    for (int64_t i = 0; i < N; i++)
        m += labels[i] >= 0 && (!mask || mask[i]);
    if (out->pred || out->dbr || 2 * m >= N ||
        !(*rows = malloc((size_t)(m ? m : 1) * sizeof **rows)))
        return 0;
    m = 0;
    for (int64_t i = 0; i < N; i++)
        if (labels[i] >= 0 && (!mask || mask[i]))
            (*rows)[m++] = i;
    return m;
}

/* dst rows idx[k] <- src row k (scatter), or src rows idx[k] -> dst row k (gather). */
static void move_rows(float *dst, const float *src, const int64_t *idx, int64_t m, int64_t w,
                      int scatter)
{
#pragma omp parallel for num_threads(ag_i_max_threads()) \
    if (m * w >= AG_PARALLEL_MIN_WORK) schedule(static)
    for (int64_t k = 0; k < m; k++)
        memcpy(dst + (scatter ? idx[k] : k) * w, src + (scatter ? k : idx[k]) * w,
               (size_t)w * sizeof *dst);
}

int ag_i_loss_cross_entropy_r(const ag_i_reducer_t *r, const float *X, int64_t N, int64_t D,
                              const ag_cross_entropy_t *ce, ag_cross_entropy_out_t *out,
                              ag_error_t *err)
{
    return ag_i_loss_cross_entropy_kept_r(r, X, N, D, ce, out, NULL, err);
}

int ag_i_loss_cross_entropy_kept_r(const ag_i_reducer_t *r, const float *X, int64_t N,
                                   int64_t D, const ag_cross_entropy_t *ce,
                                   ag_cross_entropy_out_t *out, const ag_i_keeper_t *keep,
                                   ag_error_t *err)
{
    const float *Wr = ce->Wr, *br = ce->br;
    const int64_t C = ce->C, *labels = ce->labels;
    const uint8_t *mask = ce->mask;
    float *dX = out->dX, *dWr = out->dWr, *dbr = out->dbr;
    int64_t n = 0;
    int rc = ce_check(r, X, N, D, Wr, C, labels, mask, &n, err);
    if (rc)
        return rc;
    /* With few rows counted, the head is made for those rows alone: their
       logits, dX and their part of dWr. A product's row is one chain wherever
       it lies (base/sgemm.c), and a zero row adds nothing to dWr's chains
       (ag_i_gemm_atb_rows_r): the bits of the whole, on one process or several,
       without its [N, C] logits. */
    int64_t *rows = NULL;
    const int64_t m = Wr ? few_rows(&rows, N, labels, mask, out) : 0;
    const int64_t R = m ? m : N;   /* the logits' rows */
    float *logits = keep ? keep->get(keep->ctx, R ? R * C : 1, err)
                         : ag_alloc(R ? R * C : 1, sizeof *logits, err, "cross-entropy logits");
    double *sums = ag_alloc(C > 2 ? C : 2, sizeof *sums, err, "cross-entropy");
    float *fewX = m ? ag_alloc(m * D, sizeof *fewX, err, "cross-entropy rows") : NULL;
    float *fewdX = m && dX ? ag_alloc(m * D, sizeof *fewdX, err, "cross-entropy rows") : NULL;
    if (!logits || !sums || (m && (!fewX || (dX && !fewdX)))) {
        if (!keep)
            free(logits);
        free(sums), free(fewX), free(fewdX), free(rows);
        return ag_i_reducer_failed(r, 2, err);
    }
    if (m)
        move_rows(fewX, X, rows, m, D, 0);
    if (Wr)
        ag_i_gemm_xwt(logits, m ? fewX : X, Wr, R, D, C, 0.0f);
    else if (N)
        memcpy(logits, X, (size_t)(N * C) * sizeof *logits);
    if (br)
        for (int64_t i = 0; i < R; i++)
            for (int64_t c = 0; c < C; c++)
                logits[i * C + c] += br[c];
    ce_t ctx = {logits, labels, mask, C, n, out->pred, out->pred_counted, rows, m};
    rc = ag_i_sum_rows_r(r, N, 2, R * C * 8, ce_rows, &ctx, sums, err);
    if (!rc)
        out->loss = sums[0] / (double)n, out->correct = (int64_t)sums[1], out->counted = n;
    /* the logits now hold dL/dlogits */
    if (!rc && dX && m) {   /* the counted rows' dX; the others' is zero */
        memset(dX, 0, (size_t)(N * D) * sizeof *dX);
        ag_i_gemm_xw(fewdX, logits, Wr, m, C, D, 0.0f);
        move_rows(dX, fewdX, rows, m, D, 1);
    } else if (!rc && dX && Wr) {
        ag_i_gemm_xw(dX, logits, Wr, N, C, D, 0.0f);
    } else if (!rc && dX && N) {
        memcpy(dX, logits, (size_t)(N * C) * sizeof *dX);
    }
    if (!rc && dWr && Wr) {
        memset(dWr, 0, (size_t)(C * D) * sizeof *dWr);
        rc = m ? ag_i_gemm_atb_rows_r(r, dWr, logits, fewX, rows, m, N, C, D, err)
               : ag_i_gemm_atb_r(r, dWr, logits, X, N, C, D, err);
    }
    if (!rc && dbr && !(rc = ag_i_sum_columns_r(r, logits, N, C, sums, err)))   /* dbr */
        for (int64_t c = 0; c < C; c++)
            dbr[c] = (float)sums[c];
    if (!keep)
        free(logits);
    free(fewX), free(fewdX), free(sums), free(rows);
    return rc;
}
