/*
 * The peak memory of a process of `attngraph-mpi run` (one process is the
 * case P = 1), as `attngraph plan` states it and as the run checks it before
 * it reads a CSR's edges. Counted from what src/mpi allocates; measured
 * against /usr/bin/time's maximum resident size (docs/scale.md): 2,000,000
 * nodes of 10 random in-edges on 2 processes, 2.32 GB measured for 2.32 GB
 * planned at D = 64 and 4 heads, 0.78 GB for 0.79 GB at D = 16.
 *
 * While the parts are cut, every process holds a CSR's indptr whole and
 * three arrays of N + 1 offsets besides (32 N), its own indices (8 e) and
 * runs (16 r); a pattern, N + 1 offsets (8 N). During the rounds: its part's
 * neighbourhood (16 n + 16 r), the features and states (8 n D), Q and M
 * (8 n HD), and on the halo path the K and V rows from the lowest it reads to
 * the highest (8 HD w; w = n + h where the halo is contiguous with its own
 * rows, up to N where it reads row 0 and row N - 1), with the lists and
 * datatypes of the rows sent and received (about 80 h, as many sent as
 * received); on the ring path 16 n HD for K and V (measured: 7% over on
 * window:128, 6% under on causal). Rank 0 gathers --out's rows after the
 * rounds, once Q, M, K and V are freed: 16 n + 16 r + 8 n D + 4 N D. Not
 * counted: a graph file or METIS's parts, which rank 0 holds whole while it
 * cuts them (`attngraph plan` says so).
 */
#include "cli/plan.h"

/* The MPI and OpenMP runtimes' own, measured on a 1,000-node run. */
#define RUNTIME_BYTES 20e6

double plan_peak_bytes(const plan_memory_t *m)
{
    const double N = (double)m->N, n = (double)m->n, e = (double)m->e, r = (double)m->runs;
    const double h = (double)m->halo, w = (double)m->window, D = (double)m->D;
    const double HD = (double)m->HD;
    const double cutting = m->csr ? 32 * N + 8 * e + 16 * r : 8 * N;
    const double part = 16 * n + 16 * r + 8 * n * D;
    const double rounds = part + 8 * n * HD + (m->ring ? 16 * n * HD : 8 * HD * w + 80 * h);
    const double gather = m->gather ? part + 4 * N * (double)m->out_cols : 0;
    double peak = cutting > rounds ? cutting : rounds;
    return RUNTIME_BYTES + (gather > peak ? gather : peak);
}
