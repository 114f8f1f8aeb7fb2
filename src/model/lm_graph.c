/*
 * A language model's graphs: B sequences of T tokens side by side, each
 * under one pattern within it (docs:T&(SPEC): causal added, no message
 * between sequences). The sequence's graph is made once and copied, so a
 * random pattern draws the same sources in every sequence, and the decoder
 * (B = 1) reads the graph the model trained on. A mask per layer is a graph
 * a block ('A|B|...'), blocks of one pattern sharing one.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/model.h"

int ag_lm_graph(ag_nbhd_t *nb, int64_t T, int64_t B, const char *spec, ag_error_t *err)
{
    if (!nb || !spec || T < 1 || B < 1)
        return ag_fail(err, AG_EINVAL, "ag_lm_graph: %s", !nb || !spec ? "a NULL argument" :
                       "T and B must be >= 1");
    if (B > (INT64_MAX - 1) / T)
        return ag_fail(err, AG_ELIMIT, "ag_lm_graph: %lld sequences of %lld tokens overflow "
                       "the graph's counts", (long long)B, (long long)T);
    memset(nb, 0, sizeof *nb);
    const size_t cap = strlen(spec) + 64;
    char *text = malloc(cap);
    if (!text)
        return ag_fail(err, AG_ENOMEM, "out of memory for the batch's pattern");
    if (strcmp(spec, "causal") != 0)
        snprintf(text, cap, "docs:%lld&(%s)", (long long)T, spec);
    else
        snprintf(text, cap, "docs:%lld", (long long)T);
    ag_pattern_t *p;
    int rc = ag_pattern_parse(&p, text, err);
    free(text);
    if (rc)
        return rc;
    ag_nbhd_t one;   /* one sequence's graph, then B copies side by side */
    rc = ag_nbhd_from_pattern(&one, p, T, AG_SELF_KEEP, err);
    ag_pattern_free(p);
    if (rc || B == 1) {
        if (!rc)
            *nb = one;
        return rc;
    }
    const int64_t E = one.n_edges;
    if (E > 0 && B > INT64_MAX / E) {
        ag_nbhd_destroy(&one);
        return ag_fail(err, AG_ELIMIT, "ag_lm_graph: %lld sequences of %lld tokens overflow "
                       "the graph's counts", (long long)B, (long long)T);
    }
    int64_t *ptr = ag_alloc(B * T + 1, sizeof *ptr, err, "batch graph");
    int64_t *src = ag_alloc(B * E > 0 ? B * E : 1, sizeof *src, err, "batch graph");
    if (!ptr || !src)
        rc = ag_alloc_status();
    if (!rc)
        ag_nbhd_sources(&one, 0, T, src);   /* sequence 0's; the others' shifted by b T */
    for (int64_t b = 0; !rc && b < B; b++) {
        for (int64_t t = 0; t < T; t++)
            ptr[b * T + t] = b * E + one.edge_ptr[t];
        for (int64_t e = 0; b > 0 && e < E; e++)
            src[b * E + e] = b * T + src[e];
    }
    if (!rc) {
        ptr[B * T] = B * E;
        rc = ag_nbhd_from_csr(nb, B * T, ptr, src, err);
    }
    free(ptr), free(src);
    ag_nbhd_destroy(&one);
    return rc;
}

void ag_lm_graphs_free(ag_nbhd_t **graphs, int64_t L)
{
    for (int64_t l = 0; graphs && l < L; l++) {
        int64_t first = 0;   /* a graph shared by blocks is freed at its first */
        while (graphs[first] != graphs[l])
            first++;
        if (first == l && graphs[l]) {
            ag_nbhd_destroy(graphs[l]);
            free(graphs[l]);
        }
    }
    for (int64_t l = 0; graphs && l < L; l++)
        graphs[l] = NULL;
}

/* How many blocks' patterns 'A|B|...' holds (one: every block's). */
static int64_t pattern_parts(const char *spec)
{
    int64_t parts = 1;
    for (const char *s = spec; *s; s++)
        parts += *s == '|';
    return parts;
}

/* Part k of a pattern, as a string of its own (NULL: out of memory). */
static char *pattern_part(const char *spec, int64_t k, ag_error_t *err)
{
    const char *part = spec;
    for (int64_t j = 0; j < k; j++)
        part += strcspn(part, "|") + 1;
    const size_t len = strcspn(part, "|");
    char *one = ag_alloc((int64_t)len + 1, 1, err, "a block's pattern");
    if (one) {
        memcpy(one, part, len);
        one[len] = '\0';
    }
    return one;
}

int ag_lm_graphs(ag_nbhd_t **graphs, int64_t L, int64_t T, int64_t B, const char *spec,
                 ag_error_t *err)
{
    if (!graphs || !spec || L < 1)
        return ag_fail(err, AG_EINVAL, "ag_lm_graphs: %s", L < 1 ? "L must be >= 1"
                                                                 : "a NULL argument");
    for (int64_t l = 0; l < L; l++)
        graphs[l] = NULL;
    const int64_t parts = pattern_parts(spec);
    if (parts != 1 && parts != L)
        return ag_fail(err, AG_EINVAL, "%lld patterns for %lld blocks; expected one for every "
                       "block or one a block, separated by '|'", (long long)parts, (long long)L);
    char **text = ag_calloc(parts, sizeof *text, err, "a block's pattern");
    int rc = text ? AG_OK : ag_alloc_status();
    for (int64_t k = 0; !rc && k < parts; k++)
        if (!(text[k] = pattern_part(spec, k, err)))
            rc = ag_alloc_status();
    for (int64_t l = 0; !rc && l < L; l++) {
        const char *one = text[parts == 1 ? 0 : l];
        for (int64_t j = 0; j < l && !graphs[l]; j++)   /* the pattern of a block before */
            if (strcmp(text[parts == 1 ? 0 : j], one) == 0)
                graphs[l] = graphs[j];
        if (graphs[l])
            continue;
        if (!one[0]) {
            rc = ag_fail(err, AG_EINVAL, "pattern '%s': block %lld's pattern is empty", spec,
                         (long long)l + 1);
            break;
        }
        if (!(graphs[l] = ag_calloc(1, sizeof *graphs[l], err, "a block's graph")))
            rc = ag_alloc_status();
        else if ((rc = ag_lm_graph(graphs[l], T, B, one, err))) {
            if (parts > 1)
                ag_i_fail_prefix(rc, err, "block %lld's pattern '%s'", (long long)l + 1, one);
            free(graphs[l]), graphs[l] = NULL;   /* not made: not ag_lm_graphs_free's */
        }
    }
    for (int64_t k = 0; text && k < parts; k++)
        free(text[k]);
    free(text);
    if (rc)
        ag_lm_graphs_free(graphs, L);
    return rc;
}

int ag_i_lm_pattern_check(const char *spec, int64_t L, ag_error_t *err)
{
    if (!spec[0] || strpbrk(spec, "\r\n"))
        return ag_fail(err, AG_EINVAL, "pattern '%s': expected one line, such as causal or "
                       "window:64", spec);
    const int64_t parts = pattern_parts(spec);
    int rc = AG_OK;
    for (int64_t k = 0; !rc && k < parts; k++) {
        char *one = pattern_part(spec, k, err);
        if (!one)
            return ag_alloc_status();
        ag_pattern_t *p = NULL;
        rc = one[0] ? ag_pattern_parse(&p, one, err)
                    : ag_fail(err, AG_EINVAL, "pattern '%s': block %lld's pattern is empty",
                              spec, (long long)k + 1);
        ag_pattern_free(p);
        free(one);
    }
    if (!rc && L > 0 && parts != 1 && parts != L)
        rc = ag_fail(err, AG_EINVAL, "pattern '%s': %lld patterns for %lld blocks; expected "
                     "one for every block or one a block, separated by '|'", spec,
                     (long long)parts, (long long)L);
    return rc;
}
