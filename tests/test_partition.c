/*
 * Partitions: every node in one part, parts ascending, work balanced within
 * one node's work of the mean, the same boundaries every time; halos and
 * per-part counts against a brute force over every message; METIS parts
 * valid and cutting no more edges than contiguous ones on clustered graphs.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* A random CSR of N nodes: in-degrees 0..max_deg, sources anywhere (repeats
   are multi-edges, i itself a self-loop), every tenth node isolated. */
static void random_csr(int64_t N, int max_deg, uint64_t seed, int64_t **indptr, int64_t **indices)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
#define NEXT() (s ^= s << 13, s ^= s >> 7, s ^= s << 17, s)
    *indptr = malloc((size_t)(N + 1) * sizeof **indptr);
    int64_t E = 0;
    (*indptr)[0] = 0;
    for (int64_t i = 0; i < N; i++) {
        const int64_t deg = i % 10 == 3 ? 0 : (int64_t)(NEXT() % (uint64_t)(max_deg + 1));
        E += deg;
        (*indptr)[i + 1] = E;
    }
    *indices = malloc((size_t)(E ? E : 1) * sizeof **indices);
    for (int64_t i = 0; i < N; i++) {
        int64_t *row = *indices + (*indptr)[i], n = (*indptr)[i + 1] - (*indptr)[i];
        for (int64_t k = 0; k < n; k++)
            row[k] = NEXT() % 4 == 0 ? i : (int64_t)(NEXT() % (uint64_t)N);
        /* ascending within the row (insertion sort: rows are short) */
        for (int64_t a = 1; a < n; a++)
            for (int64_t b = a; b > 0 && row[b - 1] > row[b]; b--) {
                const int64_t t = row[b];
                row[b] = row[b - 1], row[b - 1] = t;
            }
    }
#undef NEXT
}

/* Every node in exactly one part, each part's list ascending and agreeing
   with owner, first[] with the lists when contiguous. */
static void check_cover(const ag_partition_t *pt)
{
    const int64_t N = pt->n_nodes;
    char *seen = calloc((size_t)N, 1);
    ck_assert_int_eq(pt->part_ptr[0], 0);
    ck_assert_int_eq(pt->part_ptr[pt->n_parts], N);
    for (int p = 0; p < pt->n_parts; p++) {
        ck_assert_int_le(pt->part_ptr[p], pt->part_ptr[p + 1]);
        for (int64_t k = pt->part_ptr[p]; k < pt->part_ptr[p + 1]; k++) {
            const int64_t i = pt->part_nodes[k];
            ck_assert(i >= 0 && i < N);
            ck_assert_int_eq(seen[i], 0);
            seen[i] = 1;
            ck_assert_int_eq(pt->owner[i], p);
            if (k > pt->part_ptr[p])
                ck_assert_int_gt(i, pt->part_nodes[k - 1]);
        }
        if (pt->contiguous) {
            ck_assert_int_eq(pt->first[p], pt->part_ptr[p]);
            if (pt->part_ptr[p + 1] > pt->part_ptr[p])
                ck_assert_int_eq(pt->part_nodes[pt->part_ptr[p]], pt->first[p]);
        }
    }
    for (int64_t i = 0; i < N; i++)
        ck_assert_int_eq(seen[i], 1);
    free(seen);
}

/* Each part's work within the largest node work of the mean. */
static void check_balance(const ag_partition_t *pt, const int64_t *indptr, int64_t node_work)
{
    const int64_t N = pt->n_nodes, P = pt->n_parts;
    int64_t W = 0, w_max = 0;
    for (int64_t i = 0; i < N; i++) {
        const int64_t w = indptr[i + 1] - indptr[i] + node_work;
        W += w;
        w_max = w > w_max ? w : w_max;
    }
    for (int64_t p = 0; p < P; p++) {
        int64_t work = 0;
        for (int64_t k = pt->part_ptr[p]; k < pt->part_ptr[p + 1]; k++) {
            const int64_t i = pt->part_nodes[k];
            work += indptr[i + 1] - indptr[i] + node_work;
        }
        /* |work - W/P| <= w_max, in integers */
        ck_assert_msg(llabs((long long)(work * P - W)) <= (long long)(w_max * P),
                      "part %lld of %lld: work %lld, mean %.1f, largest node %lld",
                      (long long)p, (long long)P, (long long)work, (double)W / P,
                      (long long)w_max);
    }
}

START_TEST(contiguous_covers_and_balances)
{
    const int64_t sizes[] = {1, 2, 7, 100, 1000};
    const int parts[] = {1, 2, 3, 4, 7, 16, 64, 1000, 5000};
    for (size_t a = 0; a < sizeof sizes / sizeof *sizes; a++)
        for (size_t b = 0; b < sizeof parts / sizeof *parts; b++)
            for (int64_t node_work = 1; node_work <= 100; node_work *= 10) {
                int64_t *indptr, *indices;
                random_csr(sizes[a], 12, 7 + a, &indptr, &indices);
                ag_partition_t pt, again;
                ag_error_t err;
                ck_assert_int_eq(ag_partition_from_indptr(&pt, sizes[a], indptr, parts[b],
                                                          node_work, &err), AG_OK);
                ck_assert_int_eq(pt.contiguous, 1);
                check_cover(&pt);
                check_balance(&pt, indptr, node_work);
                /* the same boundaries every time */
                ck_assert_int_eq(ag_partition_from_indptr(&again, sizes[a], indptr, parts[b],
                                                          node_work, &err), AG_OK);
                ck_assert_mem_eq(pt.first, again.first, (size_t)(parts[b] + 1) * sizeof *pt.first);
                ag_partition_destroy(&pt);
                ag_partition_destroy(&again);
                free(indptr), free(indices);
            }
}
END_TEST

/* Causal in-degrees grow with i: the parts of the late nodes are short. */
START_TEST(contiguous_causal_bounds)
{
    ag_pattern_t *pat;
    ag_nbhd_t nb;
    ag_partition_t pt;
    ag_error_t err;
    ck_assert_int_eq(ag_pattern_parse(&pat, "causal", &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_from_pattern(&nb, pat, 1000, AG_SELF_KEEP, &err), AG_OK);
    ck_assert_int_eq(ag_partition_contiguous(&pt, &nb, 4, &err), AG_OK);
    check_cover(&pt);
    check_balance(&pt, nb.edge_ptr, AG_PARTITION_NODE_WORK);
    /* work of 0..k-1 is k(k+1)/2 + k of 501,500: the nearest to each quarter (by hand) */
    ck_assert_int_eq(pt.first[1], 499);
    ck_assert_int_eq(pt.first[2], 707);
    ck_assert_int_eq(pt.first[3], 866);
    ag_partition_destroy(&pt);
    ag_nbhd_destroy(&nb);
    ag_pattern_free(pat);
}
END_TEST

/* More parts than nodes: every node alone, the rest empty; one node: one part. */
START_TEST(contiguous_more_parts_than_nodes)
{
    const int64_t indptr[] = {0, 1, 1, 3, 3, 3};
    ag_partition_t pt;
    ag_error_t err;
    ck_assert_int_eq(ag_partition_from_indptr(&pt, 5, indptr, 12, 1, &err), AG_OK);
    check_cover(&pt);
    check_balance(&pt, indptr, 1);
    int empty = 0;
    for (int p = 0; p < 12; p++) {
        ck_assert_int_le(pt.part_ptr[p + 1] - pt.part_ptr[p], 1);
        empty += pt.part_ptr[p + 1] == pt.part_ptr[p];
    }
    ck_assert_int_eq(empty, 7);
    ag_partition_destroy(&pt);
}
END_TEST

START_TEST(partition_errors)
{
    const int64_t indptr[] = {0, 1, 1, 3}, bad[] = {0, 2, 1, 3};
    ag_partition_t pt;
    ag_error_t err;
    ck_assert_fails_with(ag_partition_from_indptr(&pt, 3, indptr, 0, 1, &err), err, AG_EINVAL,
                         "0 parts");
    ck_assert_ptr_null(pt.owner);
    ck_assert_fails_with(ag_partition_from_indptr(&pt, 3, indptr, AG_PARTITION_MAX_PARTS + 1, 1,
                                                  &err), err, AG_EINVAL, "expected 1 to");
    ck_assert_fails_with(ag_partition_from_indptr(&pt, 3, bad, 2, 1, &err), err, AG_EINVAL,
                         "non-decreasing");
    ck_assert_fails_with(ag_partition_from_indptr(&pt, 3, indptr, 2, 0, &err), err, AG_EINVAL,
                         "node work 0");
    ck_assert_fails_with(ag_partition_from_indptr(&pt, 0, indptr, 2, 1, &err), err, AG_EINVAL,
                         "0 nodes");
    const int32_t owner[] = {0, 2, 1};
    ck_assert_fails_with(ag_partition_from_owner(&pt, 3, owner, 2, &err), err, AG_EINVAL,
                         "node 1 has part 2");
    ag_partition_destroy(&pt);
    /* an unknown self-loops mode is refused (it was taken as AG_SELF_OFF) */
    ag_pattern_t *pat;
    ck_assert_int_eq(ag_pattern_parse(&pat, "causal", &err), AG_OK);
    int64_t first[3];
    ck_assert_fails_with(ag_partition_pattern(first, NULL, pat, 8, (ag_self_loops_t)7, 2,
                                              AG_SAMPLE_EXACT, NULL, &err),
                         err, AG_EINVAL, "self-loops mode 7; expected AG_SELF_KEEP");
    ag_pattern_free(pat);
}
END_TEST

/* The halo of every part and its counts, brute force: a table of the sources read. */
static void check_halos(const ag_partition_t *pt, const ag_nbhd_t *nb)
{
    const int64_t N = nb->n_nodes;
    ag_part_stats_t *st = calloc((size_t)pt->n_parts, sizeof *st);
    ag_error_t err;
    ck_assert_int_eq(ag_partition_stats(pt, nb, st, &err), AG_OK);
    char *read = malloc((size_t)N);
    for (int p = 0; p < pt->n_parts; p++) {
        memset(read, 0, (size_t)N);
        int64_t n_dst = 0, n_edges = 0, n_cut = 0, n_halo = 0;
        for (int64_t i = 0; i < N; i++) {
            if (pt->owner[i] != p)
                continue;
            n_dst++;
            int64_t *src = malloc((size_t)(nb->edge_ptr[i + 1] - nb->edge_ptr[i] + 1) * sizeof *src);
            ag_nbhd_sources(nb, i, i + 1, src);
            for (int64_t k = 0; k < nb->edge_ptr[i + 1] - nb->edge_ptr[i]; k++) {
                n_edges++;
                if (pt->owner[src[k]] != p) {
                    n_cut++;
                    n_halo += !read[src[k]];
                    read[src[k]] = 1;
                }
            }
            free(src);
        }
        ck_assert_int_eq(st[p].n_dst, n_dst);
        ck_assert_int_eq(st[p].n_edges, n_edges);
        ck_assert_int_eq(st[p].work, n_edges + n_dst);
        ck_assert_int_eq(st[p].n_cut, n_cut);
        ck_assert_int_eq(st[p].n_halo, n_halo);
        int64_t *rows, n_rows;
        ck_assert_int_eq(ag_partition_halo(pt, nb, p, &rows, &n_rows, &err), AG_OK);
        ck_assert_int_eq(n_rows, n_halo);
        for (int64_t k = 0; k < n_rows; k++) {
            ck_assert(read[rows[k]]);
            if (k)
                ck_assert_int_gt(rows[k], rows[k - 1]);
        }
        free(rows);
    }
    free(read);
    free(st);
}

START_TEST(halos_against_brute_force)
{
    for (uint64_t seed = 1; seed <= 6; seed++) {
        const int64_t N = 40 + 37 * (int64_t)seed;
        int64_t *indptr, *indices;
        random_csr(N, 9, seed, &indptr, &indices);
        ag_nbhd_t nb;
        ag_error_t err;
        ck_assert_int_eq(ag_nbhd_from_csr(&nb, N, indptr, indices, &err), AG_OK);
        const int parts[] = {1, 2, 3, 5, 16, (int)N + 3};
        for (size_t b = 0; b < sizeof parts / sizeof *parts; b++) {
            ag_partition_t pt;
            ck_assert_int_eq(ag_partition_contiguous(&pt, &nb, parts[b], &err), AG_OK);
            check_halos(&pt, &nb);
            ag_partition_destroy(&pt);
            /* scattered parts: owner at random */
            int32_t *owner = malloc((size_t)N * sizeof *owner);
            for (int64_t i = 0; i < N; i++)
                owner[i] = (int32_t)((i * 7919 + (int64_t)seed * 31) % parts[b]);
            ck_assert_int_eq(ag_partition_from_owner(&pt, N, owner, parts[b], &err), AG_OK);
            check_cover(&pt);
            check_halos(&pt, &nb);
            ag_partition_destroy(&pt);
            free(owner);
        }
        ag_nbhd_destroy(&nb);
        free(indptr), free(indices);
    }
}
END_TEST

/* Patterns' long runs: causal and window halos, counted by runs. */
START_TEST(halos_of_patterns)
{
    const char *specs[] = {"causal", "window:5", "window:3,2", "causal&!strided:3",
                           "random:4,9", "docs:17,40,143", "random:6,4+window:20"};
    for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
        ag_pattern_t *pat;
        ag_nbhd_t nb;
        ag_error_t err;
        ck_assert_int_eq(ag_pattern_parse(&pat, specs[k], &err), AG_OK);
        ck_assert_int_eq(ag_nbhd_from_pattern(&nb, pat, 200, AG_SELF_KEEP, &err), AG_OK);
        for (int P = 1; P <= 9; P += 4) {
            ag_partition_t pt;
            ck_assert_int_eq(ag_partition_contiguous(&pt, &nb, P, &err), AG_OK);
            check_halos(&pt, &nb);
            ag_partition_destroy(&pt);
        }
        ag_nbhd_destroy(&nb);
        ag_pattern_free(pat);
    }
}
END_TEST

static int64_t edge_cut(const ag_partition_t *pt, const ag_nbhd_t *nb)
{
    ag_part_stats_t *st = calloc((size_t)pt->n_parts, sizeof *st);
    ag_error_t err;
    ck_assert_int_eq(ag_partition_stats(pt, nb, st, &err), AG_OK);
    int64_t cut = 0;
    for (int p = 0; p < pt->n_parts; p++)
        cut += st[p].n_cut;
    free(st);
    return cut;
}

/* A graph file's neighbourhoods, node ids renumbered by a fixed shuffle when
   shuffle is set (so the file's order no longer gives the communities away). */
static void load_graph_nbhd(ag_nbhd_t *nb, const char *path, int shuffle)
{
    igraph_t g;
    ag_error_t err;
    ck_assert_int_eq(ag_graph_load(&g, path, NULL, &err), AG_OK);
    ag_nbhd_t orig;
    ck_assert_int_eq(ag_nbhd_from_graph(&orig, &g, &err), AG_OK);
    igraph_destroy(&g);
    const int64_t N = orig.n_nodes, E = orig.n_edges;
    int64_t *perm = malloc((size_t)N * sizeof *perm);
    for (int64_t i = 0; i < N; i++)
        perm[i] = i;
    uint64_t s = 12345;
    for (int64_t i = N - 1; shuffle && i > 0; i--) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const int64_t j = (int64_t)((s >> 33) % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    /* node i becomes perm[i]: rebuild the CSR by new destination */
    int64_t *src = malloc((size_t)E * sizeof *src), *indptr = calloc((size_t)N + 1, sizeof *indptr);
    int64_t *indices = malloc((size_t)E * sizeof *indices);
    ag_nbhd_sources(&orig, 0, N, src);
    for (int64_t i = 0; i < N; i++)
        indptr[perm[i] + 1] = orig.edge_ptr[i + 1] - orig.edge_ptr[i];
    for (int64_t i = 0; i < N; i++)
        indptr[i + 1] += indptr[i];
    for (int64_t i = 0; i < N; i++) {
        int64_t *row = indices + indptr[perm[i]];
        const int64_t n = orig.edge_ptr[i + 1] - orig.edge_ptr[i];
        for (int64_t k = 0; k < n; k++)
            row[k] = perm[src[orig.edge_ptr[i] + k]];
        for (int64_t a = 1; a < n; a++)
            for (int64_t b = a; b > 0 && row[b - 1] > row[b]; b--) {
                const int64_t t = row[b];
                row[b] = row[b - 1], row[b - 1] = t;
            }
    }
    ck_assert_int_eq(ag_nbhd_from_csr(nb, N, indptr, indices, &err), AG_OK);
    ag_nbhd_destroy(&orig);
    free(perm), free(src), free(indptr), free(indices);
}

START_TEST(metis_cuts_clustered_graphs)
{
    if (!ag_partition_has_metis())
        return;
    const struct { const char *path; int shuffle, parts; } cases[] = {
        {"graphs/karate.gml", 0, 2}, {"graphs/karate.gml", 1, 2}, {"graphs/karate.gml", 0, 4},
        {"graphs/planted.gml", 1, 3}, {"graphs/planted.gml", 0, 3}, {"graphs/planted.gml", 1, 6}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        ag_nbhd_t nb;
        load_graph_nbhd(&nb, cases[k].path, cases[k].shuffle);
        ag_partition_t m, m2, c;
        ag_error_t err;
        ck_assert_int_eq(ag_partition_metis(&m, &nb, cases[k].parts, 1, &err), AG_OK);
        ck_assert_int_eq(ag_partition_metis(&m2, &nb, cases[k].parts, 1, &err), AG_OK);
        ck_assert_int_eq(ag_partition_contiguous(&c, &nb, cases[k].parts, &err), AG_OK);
        check_cover(&m);
        check_halos(&m, &nb);
        ck_assert_mem_eq(m.owner, m2.owner, (size_t)nb.n_nodes * sizeof *m.owner);
        const int64_t cut_m = edge_cut(&m, &nb), cut_c = edge_cut(&c, &nb);
        ck_assert_msg(cut_m <= cut_c, "%s (shuffled %d) over %d: METIS cuts %lld, contiguous %lld",
                      cases[k].path, cases[k].shuffle, cases[k].parts, (long long)cut_m,
                      (long long)cut_c);
        if (cases[k].shuffle && cases[k].parts == 3)
            ck_assert_int_lt(2 * cut_m, cut_c);   /* the communities found, not the file order */
        ag_partition_destroy(&m);
        ag_partition_destroy(&m2);
        ag_partition_destroy(&c);
        ag_nbhd_destroy(&nb);
    }
}
END_TEST

/* P = 1, P >= N and isolated nodes need no METIS call or survive it. */
START_TEST(metis_edge_cases)
{
    if (!ag_partition_has_metis())
        return;
    int64_t *indptr, *indices;
    random_csr(60, 5, 3, &indptr, &indices);
    ag_nbhd_t nb;
    ag_error_t err;
    ck_assert_int_eq(ag_nbhd_from_csr(&nb, 60, indptr, indices, &err), AG_OK);
    const int parts[] = {1, 2, 7, 59, 60, 100};
    for (size_t b = 0; b < sizeof parts / sizeof *parts; b++) {
        ag_partition_t pt;
        ck_assert_int_eq(ag_partition_metis(&pt, &nb, parts[b], 5, &err), AG_OK);
        ck_assert_int_eq(pt.n_parts, parts[b]);
        check_cover(&pt);
        check_halos(&pt, &nb);
        ag_partition_destroy(&pt);
    }
    ag_partition_t pt;
    ck_assert_fails_with(ag_partition_metis(&pt, &nb, 0, 5, &err), err, AG_EINVAL, "0 parts");
    ck_assert_fails_with(ag_partition_metis(&pt, &nb, 2, -1, &err), err, AG_EINVAL, "seed -1");
    ag_nbhd_destroy(&nb);
    free(indptr), free(indices);
}
END_TEST

/* Counting a pattern one destination at a time, exactly, agrees with the
   compiled pattern's partition and counts. */
START_TEST(pattern_counts_exact)
{
    const char *specs[] = {"causal", "window:5", "window:3,2", "causal&!strided:3",
                           "random:4,9", "window:2+global:1", "complete", "dilated:6,2",
                           "bigbird:4,3,1,1"};
    for (size_t k = 0; k < sizeof specs / sizeof *specs; k++)
        for (int self = AG_SELF_KEEP; self <= AG_SELF_REPLACE; self++)
            for (int P = 1; P <= 300; P = P * 3 + 1) {
                ag_pattern_t *pat;
                ag_nbhd_t nb;
                ag_partition_t pt;
                ag_error_t err;
                const int64_t N = 157;
                ck_assert_int_eq(ag_pattern_parse(&pat, specs[k], &err), AG_OK);
                ck_assert_int_eq(ag_nbhd_from_pattern(&nb, pat, N, self, &err), AG_OK);
                ck_assert_int_eq(ag_partition_contiguous(&pt, &nb, P, &err), AG_OK);
                ag_part_stats_t *want = calloc((size_t)P, sizeof *want);
                ag_part_stats_t *got = calloc((size_t)P, sizeof *got);
                int64_t *first = malloc((size_t)(P + 1) * sizeof *first);
                ck_assert_int_eq(ag_partition_stats(&pt, &nb, want, &err), AG_OK);
                int exact = 0;
                ck_assert_int_eq(ag_partition_pattern(first, got, pat, N, self, P,
                                                      AG_SAMPLE_EXACT, &exact, &err), AG_OK);
                ck_assert_int_eq(exact, 1);
                ck_assert_mem_eq(first, pt.first, (size_t)(P + 1) * sizeof *first);
                memset(first, 0, (size_t)(P + 1) * sizeof *first);   /* boundaries alone */
                ck_assert_int_eq(ag_partition_pattern(first, NULL, pat, N, self, P,
                                                      AG_SAMPLE_EXACT, NULL, &err), AG_OK);
                ck_assert_mem_eq(first, pt.first, (size_t)(P + 1) * sizeof *first);
                for (int p = 0; p < P; p++) {
                    ck_assert_int_eq(got[p].n_dst, want[p].n_dst);
                    ck_assert_int_eq(got[p].n_edges, want[p].n_edges);
                    ck_assert_int_eq(got[p].work, want[p].work);
                    ck_assert_int_eq(got[p].n_cut, want[p].n_cut);
                    ck_assert_msg(got[p].n_halo == want[p].n_halo, "%s self %d, part %d of %d: "
                                  "halo %lld, want %lld", specs[k], self, p, P,
                                  (long long)got[p].n_halo, (long long)want[p].n_halo);
                }
                free(want), free(got), free(first);
                ag_partition_destroy(&pt);
                ag_nbhd_destroy(&nb);
                ag_pattern_free(pat);
            }
}
END_TEST

/* Sampled counts: exact where the pattern makes them so (causal, window),
   within a few percent for random sources. */
START_TEST(pattern_counts_sampled)
{
    const struct { const char *spec; double tol_halo; } cases[] = {
        {"random:16,3", 0.03}, {"causal", 0.0}, {"window:7", 0.0}, {"random:4,5+window:3", 0.03}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const int64_t N = 200000;
        const int P = 8;
        ag_pattern_t *pat;
        ag_error_t err;
        ck_assert_int_eq(ag_pattern_parse(&pat, cases[k].spec, &err), AG_OK);
        ag_part_stats_t want[8], got[8];
        int64_t f_want[9], f_got[9];
        int exact = 1;
        ck_assert_int_eq(ag_partition_pattern(f_want, want, pat, N, AG_SELF_KEEP, P,
                                              AG_SAMPLE_EXACT, &exact, &err), AG_OK);
        ck_assert_int_eq(ag_partition_pattern(f_got, got, pat, N, AG_SELF_KEEP, P, 500, &exact,
                                              &err), AG_OK);
        ck_assert_int_eq(exact, 0);
        for (int p = 0; p < P; p++) {
            ck_assert_int_le(llabs((long long)(f_got[p] - f_want[p])), N / 1000);
            ck_assert_int_eq(got[p].n_dst, f_got[p + 1] - f_got[p]);
            const double scale = (double)got[p].n_dst / (double)want[p].n_dst;
            const double e = (double)got[p].n_edges / ((double)want[p].n_edges * scale);
            ck_assert_msg(fabs(e - 1) < 0.02, "%s part %d: edges %lld, want about %lld",
                          cases[k].spec, p, (long long)got[p].n_edges,
                          (long long)want[p].n_edges);
            const double h = want[p].n_halo ? (double)got[p].n_halo / (double)want[p].n_halo : 1;
            ck_assert_msg(fabs(h - 1) <= cases[k].tol_halo + 1e-3 ||
                          llabs((long long)(got[p].n_halo - want[p].n_halo)) <= 2,
                          "%s part %d: halo %lld, want %lld", cases[k].spec, p,
                          (long long)got[p].n_halo, (long long)want[p].n_halo);
        }
        ag_pattern_free(pat);
    }
}
END_TEST

Suite *partition_suite(void)
{
    Suite *s = suite_create("partition");
    TCase *tc = tcase_create("partition");
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, contiguous_covers_and_balances);
    tcase_add_test(tc, contiguous_causal_bounds);
    tcase_add_test(tc, contiguous_more_parts_than_nodes);
    tcase_add_test(tc, partition_errors);
    tcase_add_test(tc, halos_against_brute_force);
    tcase_add_test(tc, halos_of_patterns);
    tcase_add_test(tc, metis_cuts_clustered_graphs);
    tcase_add_test(tc, metis_edge_cases);
    tcase_add_test(tc, pattern_counts_exact);
    tcase_add_test(tc, pattern_counts_sampled);
    suite_add_tcase(s, tc);
    return s;
}
