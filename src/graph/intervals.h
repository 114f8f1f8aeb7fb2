/*
 * Sorted lists of disjoint half-open intervals [lo, hi) of node ids: the set
 * of sources of one destination. Patterns build them; set algebra on them is
 * a linear merge. Lists are normalised: sorted, non-empty, non-overlapping and
 * non-adjacent (touching intervals are merged), so equal sets are equal lists.
 */
#ifndef AG_INTERVALS_H
#define AG_INTERVALS_H

#include <stdint.h>

typedef struct {
    int64_t lo, hi;
} ivl_t;

typedef struct {
    ivl_t *v;
    int64_t n, cap;
} ivl_list_t;

void ivl_clear(ivl_list_t *l);
void ivl_free(ivl_list_t *l);
/* Appends [lo, hi) clipped to [0, N); intervals must come in ascending order
   of lo (overlaps and touches are merged). Returns -1 when out of memory. */
int ivl_push(ivl_list_t *l, int64_t lo, int64_t hi, int64_t N);
/* Sorts and merges a list built in any order. */
void ivl_normalise(ivl_list_t *l);

int ivl_union(ivl_list_t *out, const ivl_list_t *a, const ivl_list_t *b);
int ivl_intersect(ivl_list_t *out, const ivl_list_t *a, const ivl_list_t *b);
int ivl_complement(ivl_list_t *out, const ivl_list_t *a, int64_t N);
/* Number of ids in the list. */
int64_t ivl_count(const ivl_list_t *l);

#endif
