/*
 * Plan, then compute (after ggml's ggml_graph_plan): every decision of an
 * attention call is made here, once, from the graph, the score and the
 * machine: which kernel (the plain dot-product rule, then tiled or gather),
 * its multiplier, the instruction set's loops, the team of threads, and the
 * scratch, which each kernel file sizes for its plan and this file
 * allocates. ag_i_forward and ag_i_backward then only run the kernel.
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "kernels/kernels.h"
#include "kernels/isa.h"

int ag_i_plain_scale(const ag_score_t *sc, int64_t d, float *scale)
{
    const float beta = sc ? sc->beta : 1.0f;
    if (sc && (sc->kind > AG_SCORE_DOT || sc->softcap > 0 || sc->edge_bias || sc->alibi ||
               sc->dropout > 0 || sc->edge_key || sc->edge_value))
        return 0;
    *scale = beta * (sc && sc->kind == AG_SCORE_DOT ? 1.0f : 1.0f / sqrtf((float)d));
    return 1;
}

int ag_i_use_tiled(int64_t N, int64_t E, int one_run)
{
    return one_run && N > 0 && N < INT32_MAX && E / N >= 16;
}

/* The block-sparse path computes a score for each pair of its tiles, edge or
   not; the gather kernel pays per edge, at BLOCK_CELLS_MAX times the tiled
   kernel's cost of a score or more (issue 40's table: 8-33x on the
   patterns that took it). */
#define BLOCK_CELLS_MAX 8

ag_i_layout_t ag_i_layout(const ag_nbhd_t *nb)
{
    ag_i_layout_t l = {ag_i_one_run(nb, 0, nb->n_nodes), -1};
    if (!l.one_run)
        l.cells = ag_i_block_cells(nb, 0, nb->n_nodes);
    return l;
}

ag_i_kernel_t ag_i_layout_kernel(int64_t N, int64_t E, const ag_i_layout_t *lay)
{
    if (ag_i_use_tiled(N, E, lay->one_run))
        return AG_I_KERNEL_TILED;
    if (!lay->one_run && lay->cells >= 0 && N > 0 && E / N >= 16 &&
        lay->cells <= BLOCK_CELLS_MAX * E)
        return AG_I_KERNEL_BLOCKS;
    return AG_I_KERNEL_GATHER;
}

const char *ag_attention_kernel(const ag_nbhd_t *nb, int64_t d, const ag_score_t *score)
{
    float scale;
    if (!ag_i_plain_scale(score, d, &scale))
        return ag_i_kernel_name(AG_I_KERNEL_GENERIC);
    const ag_i_layout_t lay = ag_i_layout(nb);
    return ag_i_kernel_name(ag_i_layout_kernel(nb->n_nodes, nb->n_edges, &lay));
}

const char *ag_i_kernel_name(ag_i_kernel_t k)
{
    static const char *const names[] = {"auto", "simple", "tiled", "gather", "generic",
                                        "blocks"};
    return names[k];
}

int ag_i_plan_scratch(ag_i_plan_t *p, int64_t per_thread, int64_t shared, const char *what,
                      ag_error_t *err)
{
    p->per_thread = per_thread;
    p->scratch = ag_i_alloc_lines(p->threads * per_thread + shared, sizeof(float), err, what);
    if (!p->scratch)
        return ag_alloc_status();
    p->shared = p->scratch + p->threads * per_thread;
    return AG_OK;
}

/* A plan's fields for the kernel chosen, before the kernel's own part. */
static void plan_init(ag_i_plan_t *p, int backward, ag_i_kernel_t asked, ag_i_kernel_t kernel,
                      const ag_nbhd_t *nb, int64_t H, int64_t d, const ag_score_t *score,
                      int64_t lo, int64_t hi, int64_t klo, int64_t khi)
{
    memset(p, 0, sizeof *p);
    p->asked = asked;
    p->plain = ag_i_plain_scale(score, d, &p->scale);
    p->backward = backward, p->kernel = kernel;
    p->N = nb->n_nodes, p->E = nb->n_edges, p->H = H, p->d = d;
    p->edge_ptr = nb->edge_ptr, p->run_ptr = nb->run_ptr;
    p->kind = score ? score->kind : AG_SCORE_SCALED_DOT;
    p->isa = ag_i_isa();
    /* (a kernel the rule picks is sized as a dense one) */
    const double per = asked == AG_I_KERNEL_GATHER || asked == AG_I_KERNEL_GENERIC
                           ? AG_I_NS_SCATTERED : AG_I_NS_DENSE;
    p->threads = ag_i_team(per * (double)(nb->edge_ptr[hi] - nb->edge_ptr[lo]) * (double)H *
                           (double)d);
    p->lo = lo, p->hi = hi, p->klo = klo, p->khi = khi;
}

/* The kernel's part of the plan: its scratch and what it learns of nb. */
static int kernel_plan(ag_i_plan_t *p, const ag_nbhd_t *nb, const ag_score_t *score,
                       ag_error_t *err)
{
    int rc;
    switch (p->kernel) {
    case AG_I_KERNEL_SIMPLE:
        rc = ag_i_simple_plan(p, nb, p->H, p->d, err);
        break;
    case AG_I_KERNEL_TILED:
    case AG_I_KERNEL_BLOCKS:
        rc = ag_i_tiled_plan(p, nb, p->H, p->d, err);
        break;
    case AG_I_KERNEL_GATHER:
        rc = ag_i_gather_plan(p, nb, p->H, p->d, err);
        break;
    default:
        rc = ag_i_generic_plan(p, nb, p->H, p->d, score, err);
    }
    if (rc)   /* a plan that failed holds nothing */
        ag_i_plan_free(p);
    return rc;
}

/* The plan of the kernel asked for (AUTO: the rule's) on the rows given. */
static int plan_rows(ag_i_plan_t *p, int backward, ag_i_kernel_t kernel,
                     const ag_i_layout_t *lay, const ag_nbhd_t *nb, int64_t H, int64_t d,
                     const ag_score_t *score, int64_t lo, int64_t hi, int64_t klo, int64_t khi,
                     ag_error_t *err)
{
    ag_i_kernel_t k = kernel;
    if (k == AG_I_KERNEL_AUTO)
        k = !ag_i_plain_scale(score, d, &(float){0})
                ? AG_I_KERNEL_GENERIC
                : ag_i_layout_kernel(nb->n_nodes, nb->n_edges, lay);
    plan_init(p, backward, kernel, k, nb, H, d, score, lo, hi, klo, khi);
    if (p->kernel != AG_I_KERNEL_GENERIC && !p->plain)
        return ag_fail(err, AG_EINVAL, "attention: the %s kernel runs plain dot-product "
                       "softmax scores only", ag_i_kernel_name(p->kernel));
    if (p->kernel == AG_I_KERNEL_TILED && (!lay->one_run || nb->n_nodes >= INT32_MAX))
        return ag_fail(err, AG_EINVAL, "tiled kernel: %s", lay->one_run
                       ? "the graph has 2^31 nodes or more"
                       : "a destination has more than one run of sources");
    if (p->kernel == AG_I_KERNEL_BLOCKS && lay->cells < 0)
        return ag_fail(err, AG_EINVAL, "block-sparse kernel: a destination reads a source "
                       "twice (a multi-edge)%s", nb->n_nodes >= INT32_MAX ? ", or the graph "
                       "has 2^31 nodes or more" : "");
    if (backward && !nb->out_ptr)
        return ag_fail(err, AG_EINVAL, "attention backward: the neighbourhoods are not "
                       "transposed (ag_nbhd_transpose)");
    return kernel_plan(p, nb, score, err);
}

int ag_i_plan(ag_i_plan_t *p, int backward, ag_i_kernel_t kernel, const ag_nbhd_t *nb,
              int64_t H, int64_t d, const ag_score_t *score, ag_error_t *err)
{
    const int64_t N = nb->n_nodes;
    float scale;
    const int fused = kernel == AG_I_KERNEL_AUTO && ag_i_plain_scale(score, d, &scale);
    ag_i_layout_t lay = {0, -1};   /* what the kernel asked for needs, and no more */
    if (kernel == AG_I_KERNEL_TILED)
        lay.one_run = ag_i_one_run(nb, 0, N);
    else if (kernel == AG_I_KERNEL_BLOCKS)
        lay.cells = ag_i_block_cells(nb, 0, N);
    else if (fused)
        lay = ag_i_layout(nb);
    return plan_rows(p, backward, kernel, &lay, nb, H, d, score, 0, N, 0, N, err);
}

int ag_i_plan_part(ag_i_plan_t *p, int backward, const ag_nbhd_t *nb, int64_t H, int64_t d,
                   const ag_score_t *score, int64_t lo, int64_t hi, int64_t klo, int64_t khi,
                   const ag_i_layout_t *lay, ag_error_t *err)
{
    float scale;
    memset(p, 0, sizeof *p);   /* a refused plan holds nothing either */
    if (backward && !ag_i_plain_scale(score, d, &scale))
        return ag_fail(err, AG_EINVAL, "attention backward on a part of the graph: plain "
                       "dot-product scores only (ag_i_plan_generic_part runs the others)");
    int rc = plan_rows(p, backward, AG_I_KERNEL_AUTO, lay, nb, H, d, score, lo, hi, klo, khi,
                       err);
    p->part = 1;
    return rc;
}

int ag_i_plan_generic_part(ag_i_plan_t *p, const ag_nbhd_t *nb, int64_t H, int64_t d,
                           const ag_score_t *score, int64_t lo, int64_t hi, int64_t qlo,
                           int64_t qhi, int64_t klo, int64_t khi, ag_error_t *err)
{
    memset(p, 0, sizeof *p);
    if (!nb->out_ptr)
        return ag_fail(err, AG_EINVAL, "attention backward: the neighbourhoods are not "
                       "transposed (ag_nbhd_transpose)");
    if (lo % AG_I_GENERIC_CHUNK != 0 && lo < hi)
        return ag_fail(err, AG_EINVAL, "attention backward on a part: destinations from "
                       "%lld, not a multiple of %d", (long long)lo, AG_I_GENERIC_CHUNK);
    plan_init(p, 1, AG_I_KERNEL_GENERIC, AG_I_KERNEL_GENERIC, nb, H, d, score, lo, hi, klo,
              khi);
    p->part = 1, p->wlo = qlo, p->whi = qhi;
    return kernel_plan(p, nb, score, err);
}

int ag_i_forward(const ag_i_plan_t *p, const ag_i_fwd_t *a, ag_error_t *err)
{
    switch (p->kernel) {
    case AG_I_KERNEL_SIMPLE:
        ag_i_simple_forward(p, a);
        return AG_OK;
    case AG_I_KERNEL_TILED:
    case AG_I_KERNEL_BLOCKS:
        ag_i_tiled_forward(p, a);
        return AG_OK;
    case AG_I_KERNEL_GATHER:
        ag_i_gather_forward(p, a);
        return AG_OK;
    default:
        if (p->part && a->x && a->x->lse)
            return ag_fail(err, AG_EINVAL, "attention on a part of the graph: the "
                           "log-sum-exp of plain dot-product scores only");
        ag_i_generic_forward(p, a);
        return AG_OK;
    }
}

int ag_i_backward(const ag_i_plan_t *p, const ag_i_bwd_t *a, ag_error_t *err)
{
    (void)err;
    switch (p->kernel) {
    case AG_I_KERNEL_SIMPLE:
        ag_i_simple_backward(p, a);
        return AG_OK;
    case AG_I_KERNEL_TILED:
    case AG_I_KERNEL_BLOCKS:
        ag_i_tiled_backward(p, a);
        return AG_OK;
    case AG_I_KERNEL_GATHER:
        ag_i_gather_backward(p, a);
        return AG_OK;
    default:
        ag_i_generic_backward(p, a);
        return AG_OK;
    }
}

int ag_i_plan_fits(const ag_i_plan_t *p, int backward, const ag_nbhd_t *nb, int64_t H,
                   int64_t d, const ag_score_t *score)
{
    float scale;
    const int plain = ag_i_plain_scale(score, d, &scale);
    return p->scratch && p->backward == backward && p->N == nb->n_nodes &&
           p->E == nb->n_edges && p->edge_ptr == nb->edge_ptr && p->run_ptr == nb->run_ptr &&
           p->H == H && p->d == d &&
           p->kind == (score ? score->kind : AG_SCORE_SCALED_DOT) && p->plain == plain &&
           (!plain || p->scale == scale);
}

void ag_i_plan_free(ag_i_plan_t *p)
{
    free(p->scratch), free(p->lists);
    p->scratch = p->shared = NULL;
    p->lists = NULL;
}

int ag_i_attention_with(ag_i_kernel_t kernel, const ag_i_fwd_t *a, ag_error_t *err)
{
    ag_i_plan_t p;
    int rc = ag_i_plan(&p, 0, kernel, a->nb, a->H, a->d, a->score, err);
    if (!rc)
        rc = ag_i_forward(&p, a, err);
    ag_i_plan_free(&p);
    return rc;
}

int ag_i_backward_with(ag_i_kernel_t kernel, const ag_i_bwd_t *a, ag_error_t *err)
{
    ag_i_plan_t p;
    int rc = ag_i_plan(&p, 1, kernel, a->nb, a->H, a->d, a->score, err);
    if (!rc)
        rc = ag_i_backward(&p, a, err);
    ag_i_plan_free(&p);
    return rc;
}
