/* Interval lists: the set algebra behind pattern composition. */
#include <stdlib.h>

#include "base/base.h"
#include "graph/intervals.h"

void ivl_clear(ivl_list_t *l)
{
    l->n = 0;
}

void ivl_free(ivl_list_t *l)
{
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

static int reserve(ivl_list_t *l, int64_t n)
{
    if (n <= l->cap)
        return 0;
    int64_t cap = l->cap ? l->cap : 8;
    while (cap < n)
        cap *= 2;
    ivl_t *v = ag_i_realloc(l->v, cap, sizeof *v, NULL, "intervals");
    if (!v)
        return -1;
    l->v = v;
    l->cap = cap;
    return 0;
}

int ivl_push(ivl_list_t *l, int64_t lo, int64_t hi, int64_t N)
{
    if (lo < 0)
        lo = 0;
    if (hi > N)
        hi = N;
    if (lo >= hi)
        return 0;
    if (l->n > 0 && lo <= l->v[l->n - 1].hi) {
        if (hi > l->v[l->n - 1].hi)
            l->v[l->n - 1].hi = hi;
        return 0;
    }
    if (reserve(l, l->n + 1))
        return -1;
    l->v[l->n++] = (ivl_t){lo, hi};
    return 0;
}

static int by_lo(const void *a, const void *b)
{
    const ivl_t *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

void ivl_normalise(ivl_list_t *l)
{
    if (l->n < 2)
        return;
    qsort(l->v, (size_t)l->n, sizeof *l->v, by_lo);
    int64_t k = 0;
    for (int64_t i = 1; i < l->n; i++) {
        if (l->v[i].lo <= l->v[k].hi) {
            if (l->v[i].hi > l->v[k].hi)
                l->v[k].hi = l->v[i].hi;
        } else {
            l->v[++k] = l->v[i];
        }
    }
    l->n = k + 1;
}

int ivl_union(ivl_list_t *out, const ivl_list_t *a, const ivl_list_t *b)
{
    ivl_clear(out);
    int64_t i = 0, j = 0;
    while (i < a->n || j < b->n) {
        const ivl_t *next = j >= b->n || (i < a->n && a->v[i].lo <= b->v[j].lo) ? &a->v[i++]
                                                                              : &b->v[j++];
        if (ivl_push(out, next->lo, next->hi, INT64_MAX))
            return -1;
    }
    return 0;
}

int ivl_intersect(ivl_list_t *out, const ivl_list_t *a, const ivl_list_t *b)
{
    ivl_clear(out);
    int64_t i = 0, j = 0;
    while (i < a->n && j < b->n) {
        int64_t lo = a->v[i].lo > b->v[j].lo ? a->v[i].lo : b->v[j].lo;
        int64_t hi = a->v[i].hi < b->v[j].hi ? a->v[i].hi : b->v[j].hi;
        if (lo < hi && ivl_push(out, lo, hi, INT64_MAX))
            return -1;
        if (a->v[i].hi < b->v[j].hi)
            i++;
        else
            j++;
    }
    return 0;
}

int ivl_complement(ivl_list_t *out, const ivl_list_t *a, int64_t N)
{
    ivl_clear(out);
    int64_t at = 0;
    for (int64_t i = 0; i < a->n; i++) {
        if (ivl_push(out, at, a->v[i].lo, N))
            return -1;
        at = a->v[i].hi;
    }
    return ivl_push(out, at, N, N);
}

int64_t ivl_count(const ivl_list_t *l)
{
    int64_t c = 0;
    for (int64_t i = 0; i < l->n; i++)
        c += l->v[i].hi - l->v[i].lo;
    return c;
}
