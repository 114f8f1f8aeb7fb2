/*
 * The pattern language: ag_pattern_parse, then compilation on small N with
 * each self-loop mode, then one attention round on the result (which reads
 * every run, so a malformed neighbourhood shows). Byte 0: N = 1 + byte % 48;
 * the rest is the spec (text up to the first NUL). A pattern that sizes
 * itself is compiled at its own size too when that is small.
 */
#include <stdlib.h>
#include <string.h>

#include "attngraph.h"
#include "fuzz_common.h"

#define MAX_N 256
#define MAX_E 20000

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_setup();
    return 0;
}

static float Q[MAX_N * 2], K[MAX_N * 2], V[MAX_N * 2], M[MAX_N * 2];

static void compile(const ag_pattern_t *pat, int64_t N)
{
    ag_error_t err;
    for (int self = 0; self < 3; self++) {
        ag_nbhd_t nb;
        if (ag_nbhd_from_pattern(&nb, pat, N, (ag_self_loops_t)self, &err) != AG_OK)
            continue;
        if (nb.n_nodes != N || nb.edge_ptr[N] != nb.n_edges || nb.run_ptr[N] != nb.n_runs)
            abort();   /* the structure disagrees with itself */
        if (nb.n_edges <= MAX_E) {
            ag_attention(&nb, Q, K, V, 2, 1, NULL, M, &err);
            int64_t *src = malloc((size_t)(nb.n_edges ? nb.n_edges : 1) * sizeof *src);
            ag_nbhd_sources(&nb, 0, N, src);
            for (int64_t s = 0; s < nb.n_edges; s++)
                if (src[s] < 0 || src[s] >= N)
                    abort();   /* a source outside 0..N-1 */
            free(src);
        }
        ag_nbhd_destroy(&nb);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    static int ready;
    if (!ready) {
        ag_random_normal(Q, MAX_N * 2, 1, 0, 1);
        ag_random_normal(K, MAX_N * 2, 1, 1, 1);
        ag_random_normal(V, MAX_N * 2, 1, 2, 1);
        ready = 1;
    }
    char *spec = malloc(size);
    memcpy(spec, data + 1, size - 1);
    spec[size - 1] = '\0';
    int64_t N = 1 + data[0] % 48;
    ag_error_t err;
    ag_pattern_t *pat = NULL;
    if (ag_pattern_parse(&pat, spec, &err) == AG_OK) {
        ag_pattern_spec(pat);
        compile(pat, N);
        int64_t own = ag_pattern_size(pat);
        if (own > 0 && own <= MAX_N && own != N)
            compile(pat, own);
        ag_pattern_free(pat);
    }
    free(spec);
    return 0;
}
