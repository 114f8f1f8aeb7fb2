/* The parsed form of a pattern, shared by its parser and its compiler. */
#ifndef AG_PATTERN_AST_H
#define AG_PATTERN_AST_H

#include <stdint.h>
#include <stdlib.h>

#include "graph/graph.h"
#include "graph/intervals.h"

#define MAX_PARAM ((int64_t)1 << 40)   /* keeps i + param arithmetic far from overflow */
#define MAX_PARAMS 4096

typedef enum {
    P_COMPLETE, P_CAUSAL, P_WINDOW, P_WINDOW2, P_DILATED, P_STRIDED, P_FIXED, P_PREFIX,
    P_GLOBAL, P_GLOBAL_IDS, P_RANDOM, P_BIGBIRD, P_BLOCKS, P_DOCS, P_PADDING, P_CROSS,
    P_GRID, P_AXIAL, P_SELF, P_GRAPH, P_HOPS, P_EXPANDER, P_VIRTUAL,
    P_UNION, P_INTERSECT, P_NOT
} kind_t;

typedef struct pnode {
    kind_t kind;
    int64_t a[5];             /* the atom's parameters */
    int64_t *list;            /* blocks/docs: block starts [n_list+1]; global ids: sorted */
    int64_t n_list;
    struct pnode *l, *r;      /* operands */
    ivl_list_t buf;           /* this node's result for the current destination */
    int64_t *scratch;         /* random and bigbird sampling space; hops: its marks and
                                 queues; expander: its permutations */
    int64_t scratch_cap;
    int64_t scratch_n;        /* expander: the node count its permutations are for (0: none) */
    char *text;               /* the atom as written, for messages */
} pnode_t;

struct ag_pattern {
    char *spec;
    pnode_t *root;
    const ag_nbhd_t *graph;   /* what graph and hops:k read (ag_pattern_bind_graph), or NULL */
    int64_t n_virtual;        /* V of virtual:V (0: none): nodes appended after the others */
};

/* Frees a node and its operands (pattern_parse.c). */
void pattern_node_free(pnode_t *n);

static inline int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

#endif
