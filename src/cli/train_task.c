/* What `train` learns: labels or targets, and the nodes each mask selects. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cli/train.h"

/* A mask [N] of 0 and 1 (bool, any integer dtype, or 0.0/1.0); of masks of
   several splits [S, N], row `split`. */
static int read_mask(uint8_t **mask, const char *path, const char *option, int64_t N,
                     int64_t split, ag_error_t *err)
{
    *mask = NULL;
    ag_array_t a;
    int rc = ag_array_read_npy(&a, path, err);
    if (rc)
        return rc;
    if (a.ndim == 2 && a.shape[1] == N) {   /* several splits: one row */
        const int64_t S = a.shape[0], k = split < 0 ? 0 : split;
        if (k >= S) {
            ag_array_destroy(&a);
            return ag_fail(err, AG_EINVAL, "%s %s holds %lld split%s [%lld, %lld]; --split %lld "
                           "is not one of 0..%lld", option, path, (long long)S, AG_PLURAL(S),
                           (long long)S, (long long)N, (long long)split, (long long)S - 1);
        }
        memmove(a.data, a.data + k * N, (size_t)N * sizeof *a.data);
        a.ndim = 1, a.shape[0] = N;
    } else if (split >= 0 && a.ndim == 1) {
        ag_array_destroy(&a);
        return ag_fail(err, AG_EINVAL, "%s %s is one mask [%lld]; --split %lld chooses a row of "
                       "masks of several splits [S, N]", option, path, (long long)a.shape[0],
                       (long long)split);
    }
    if (a.ndim != 1 || a.shape[0] != N) {
        rc = a.ndim != 1 ? ag_fail(err, AG_EINVAL, "%s %s has %d dimensions; expected one "
                                   "value per node [%lld]", option, path, a.ndim, (long long)N)
                         : ag_fail(err, AG_EINVAL, "%s %s has %lld entr%s; the graph has %lld "
                                   "node%s", option, path, (long long)a.shape[0],
                                   a.shape[0] == 1 ? "y" : "ies", (long long)N, AG_PLURAL(N));
        ag_array_destroy(&a);
        return rc;
    }
    uint8_t *m = ag_alloc(N, 1, err, option);
    for (int64_t i = 0; m && i < N; i++) {
        if (a.data[i] != 0 && a.data[i] != 1) {
            rc = ag_fail(err, AG_EINVAL, "%s %s: entry %lld is %g; a mask holds 0 (out) and 1 "
                         "(in), or booleans", option, path, (long long)i, a.data[i]);
            break;
        }
        m[i] = a.data[i] != 0;
    }
    ag_array_destroy(&a);
    if (!m)
        return ag_alloc_status();
    if (rc) {
        free(m);
        return rc;
    }
    *mask = m;
    return AG_OK;
}

/* Classes are 0..C-1 with C from the largest label: a label beyond the real
   classes (a typo, or classes numbered from 1) makes empty ones, which the
   readout then learns to avoid. Worth a word on standard error. */
static void warn_empty_classes(const char *path, const int64_t *labels, int64_t N, int64_t C)
{
    unsigned char *seen = calloc((size_t)C, 1);
    if (!seen)
        return;
    for (int64_t i = 0; i < N; i++)
        if (labels[i] >= 0)
            seen[labels[i]] = 1;
    int64_t empty = 0;
    char list[128] = "";
    for (int64_t c = 0; c < C; c++)
        if (!seen[c] && empty++ < 5) {
            size_t used = strlen(list);
            snprintf(list + used, sizeof list - used, "%s%lld", used ? ", " : "", (long long)c);
        }
    free(seen);
    if (empty)
        fprintf(stderr, "attngraph: warning: --labels %s: class%s %s%s ha%s no node (C = %lld, "
                "from the largest label)\n", path, empty > 1 ? "es" : "", list,
                empty > 5 ? ", ..." : "", empty > 1 ? "ve" : "s", (long long)C);
}

static int read_labels(task_t *t, const char *path, int64_t N, ag_error_t *err)
{
    int64_t n;
    int rc = ag_index_read_npy(&t->labels, &n, path, err);
    if (rc) {   /* say which option it was: a float array is the usual mistake */
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        return ag_fail(err, (ag_status_t)rc, "--labels %s (integer classes 0..C-1, -1 for an "
                       "unlabelled node)", why);
    }
    if (n != N)
        return ag_fail(err, AG_EINVAL, "--labels %s has %lld entr%s; the graph has %lld node%s",
                       path, (long long)n, n == 1 ? "y" : "ies", (long long)N, AG_PLURAL(N));
    int64_t max = -1;
    for (int64_t i = 0; i < N; i++) {
        if (t->labels[i] < -1)
            return ag_fail(err, AG_EINVAL, "--labels %s: node %lld has label %lld; labels are "
                           "classes 0..C-1, or -1 for an unlabelled node", path, (long long)i,
                           (long long)t->labels[i]);
        if (t->labels[i] > max)
            max = t->labels[i];
    }
    if (max < 0)
        return ag_fail(err, AG_EINVAL, "--labels %s: every label is -1; nothing to learn", path);
    if (max == 0)
        return ag_fail(err, AG_EINVAL, "--labels %s has one class (0); nothing to learn: "
                       "expected two classes or more", path);
    if (max >= 1 << 20)
        return ag_fail(err, AG_EINVAL, "--labels %s: label %lld; classes are numbered "
                       "0..C-1, C at most %d", path, (long long)max, 1 << 20);
    t->C = max + 1;
    warn_empty_classes(path, t->labels, N, t->C);
    return AG_OK;
}

/* Nodes of mask (NULL: all) that count: labelled ones for classes. */
static int64_t counted(const task_t *t, const uint8_t *mask)
{
    int64_t n = 0;
    for (int64_t i = 0; i < t->N; i++)
        n += (!mask || mask[i]) && (!t->labels || t->labels[i] >= 0);
    return n;
}

int task_load(task_t *t, const train_opts_t *o, int64_t N, int64_t D, ag_error_t *err)
{
    memset(t, 0, sizeof *t);
    t->N = N;
    int rc;
    if (o->labels) {
        rc = read_labels(t, o->labels, N, err);
    } else {
        rc = ag_matrix_read_npy(&t->targets, o->targets, err);
        if (!rc && (t->targets.rows != N || t->targets.cols != D))
            rc = ag_fail(err, AG_EINVAL, "--targets %s is [%lld, %lld]; the states are [%lld, "
                         "%lld] (nodes, feature width)", o->targets, (long long)t->targets.rows,
                         (long long)t->targets.cols, (long long)N, (long long)D);
    }
    if (!rc && o->train_mask)
        rc = read_mask(&t->train, o->train_mask, "--train-mask", N, o->split, err);
    if (!rc && o->eval_mask)
        rc = read_mask(&t->eval, o->eval_mask, "--eval-mask", N, o->split, err);
    if (!rc && o->test_mask)
        rc = read_mask(&t->test, o->test_mask, "--test-mask", N, o->split, err);
    if (!rc && !t->train && !(t->train = ag_alloc(N, 1, err, "train mask")))
        rc = ag_alloc_status();
    if (!rc && !o->train_mask)
        memset(t->train, 1, (size_t)N);
    if (!rc && !o->eval_mask && o->train_mask) {   /* held out: the rest */
        if (!(t->eval = ag_alloc(N, 1, err, "eval mask")))
            return ag_alloc_status();
        for (int64_t i = 0; i < N; i++)   /* and outside --test-mask: it is not for choosing */
            t->eval[i] = !t->train[i] && !(t->test && t->test[i]);
        if (!counted(t, t->eval))
            free(t->eval), t->eval = NULL;   /* nothing held out: no eval figures */
    }
    if (!rc && o->metric == METRIC_AUC && t->C != 2)
        rc = ag_fail(err, AG_EINVAL, "--metric auc is for two classes (ROC AUC of class 1); "
                     "%s has %s", o->labels ? o->labels : o->targets,
                     t->C ? "more classes" : "targets, no classes");
    t->auc = o->metric == METRIC_AUC || (o->metric == METRIC_AUTO && o->data && t->C == 2);
    if (rc)
        return rc;
    const char *what = t->labels ? "labelled node" : "node";
    if (!(t->n_train = counted(t, t->train)))
        return o->train_mask
                   ? ag_fail(err, AG_EINVAL, "--train-mask %s selects no %s; nothing to learn",
                             o->train_mask, what)
                   : ag_fail(err, AG_EINVAL, "no %s; nothing to learn", what);
    if (t->eval && !(t->n_eval = counted(t, t->eval)))
        return ag_fail(err, AG_EINVAL, "--eval-mask %s selects no %s; nothing to evaluate",
                       o->eval_mask, what);
    if (t->test && !(t->n_test = counted(t, t->test)))
        return ag_fail(err, AG_EINVAL, "--test-mask %s selects no %s; nothing to test",
                       o->test_mask, what);
    return AG_OK;
}

int task_add_virtual(task_t *t, int64_t V, ag_error_t *err)
{
    const int64_t N = t->N, all = N + V;
    if (t->labels) {
        int64_t *l = ag_i_realloc(t->labels, all, sizeof *l, err, "labels");
        if (!l)
            return ag_alloc_status();
        t->labels = l;
        for (int64_t i = N; i < all; i++)
            l[i] = -1;
    }
    if (t->targets.data && matrix_pad_rows(&t->targets, all, err))
        return ag_alloc_status();
    uint8_t **masks[] = {&t->train, &t->eval, &t->test};
    for (int k = 0; k < 3; k++) {
        if (!*masks[k])
            continue;
        uint8_t *m = ag_i_realloc(*masks[k], all, 1, err, "mask");
        if (!m)
            return ag_alloc_status();
        memset(m + N, 0, (size_t)V);
        *masks[k] = m;
    }
    t->N = all;
    return AG_OK;
}

void task_free(task_t *t)
{
    free(t->labels);
    ag_matrix_destroy(&t->targets);
    free(t->train);
    free(t->eval);
    free(t->test);
    memset(t, 0, sizeof *t);
}
