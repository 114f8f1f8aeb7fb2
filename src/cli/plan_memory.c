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
 * (8 n HD), and on the halo path the K and V rows it reads, its own and its
 * halo's (8 HD (n + h)), with the lists and datatypes of the rows sent and
 * received (about 80 h, as many sent as received); on the ring path its own
 * K and V rows twice (the round's, and the ring's copy that stays while the
 * blocks pass: 16 n HD). Rank 0 gathers --out's rows after the rounds, once
 * Q, M, K and V are freed: 16 n + 16 r + 8 n D + 4 N D.
 */
#include "cli/plan.h"

/* The MPI and OpenMP runtimes' own, measured on a 1,000-node run. */
#define RUNTIME_BYTES 20e6

double plan_peak_bytes(const plan_memory_t *m)
{
    const double N = (double)m->N, n = (double)m->n, e = (double)m->e, r = (double)m->runs;
    const double h = (double)m->halo, D = (double)m->D, HD = (double)m->HD;
    const double cutting = m->csr ? 32 * N + 8 * e + 16 * r : 8 * N;
    const double part = 16 * n + 16 * r + 8 * n * D;
    const double rounds = part + 8 * n * HD + (m->ring ? 16 * n * HD
                                                       : 8 * HD * (n + h) + 80 * h);
    const double gather = m->gather ? part + 4 * N * (double)m->out_cols : 0;
    double peak = cutting > rounds ? cutting : rounds;
    return RUNTIME_BYTES + (gather > peak ? gather : peak);
}
