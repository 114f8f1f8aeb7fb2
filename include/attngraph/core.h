/*
 * attngraph — attention as message passing on graphs: the core.
 *
 * Everything that works on arrays (CSR, patterns, attention, rounds, gradients,
 * training, .npy) and needs no igraph header; attngraph/igraph.h adds graph
 * files. A program that only has CSR arrays includes this header alone.
 *
 * Conventions (see README.md, "Conventions"):
 *   - Edge u -> v: v receives from u (v's query meets u's key; u's value flows
 *     to v). Undirected edges count in both directions; an undirected
 *     self-loop is one message. Each multi-edge is its own message.
 *   - N nodes, E messages, H heads of width d, model width D.
 *   - Q, K, V and messages are row-major float32 [N, H*d]; head h is columns
 *     h*d .. (h+1)*d-1.
 *   - Weight matrices are [out, in] like torch.nn.Linear.weight: y = x W^T.
 *
 * Errors: every fallible function returns AG_OK (0) or an ag_status_t and,
 * when err is not NULL, fills it with one line naming the file, the value and
 * what was expected. The library never prints, never exits and never lets
 * igraph abort: it swaps in its own igraph error handler for the duration of
 * each igraph call and restores the host's afterwards.
 *
 * Initialisation: a function that initialises an out-parameter (a struct,
 * or a pointer it allocates) leaves it zeroed (NULL pointers, zero sizes)
 * when it fails, so calling its _destroy / free on it is always safe,
 * whether the call succeeded or not. The one exception is an igraph_t, which
 * is igraph's: on failure it is left uninitialised and must not be destroyed.
 *
 * Threads: kernels and dense products run with OpenMP (ag_set_threads
 * chooses how many); results are bitwise identical for any thread count. igraph is not thread-safe: call the functions that take an igraph_t
 * from one thread at a time. Otherwise several host threads may call the
 * library at once on data of their own, with the same bits as one after the
 * other.
 *
 * Process-wide state, all of it (everything else travels in the arguments):
 *   - the memory budget (ag_set_memory_budget): one number, set atomically;
 *   - the kernels' and products' instruction set: the best the CPU runs, or
 *     AG_SIMD's, read once at the first kernel call (ag_simd_isa). Each attention call
 *     (and each run of rounds, and each training step) plans its kernel
 *     first: the plan fixes the instruction set, the calling thread's OpenMP
 *     count and the kernel's scratch, and the computation keeps to them;
 *   - who chose the thread count, and the team the library's parallel
 *     regions run on now. One pool of threads does the work: the library's
 *     OpenMP team, the dense products included (the library's own, no BLAS
 *     thread pool beside it). By default (no OMP_NUM_THREADS, no ag_set_threads
 *     count, the calling thread's OpenMP count as it started) the library
 *     shares the machine: while its calling thread waits for a core (the
 *     kernel's run delay, read every 20 ms) and its regions are short, the
 *     team shrinks to the cores other programs leave, and the full team is
 *     tried again after 0.2-2 s. The results are the same bits for any team.
 *     A count the user chose (OMP_NUM_THREADS, ag_set_threads(n > 0), or
 *     AG_THREADS_FIXED=1 in the environment) is kept as it is;
 *   - how idle threads wait is libgomp's, read once when it loads: its
 *     default spins 300,000 pauses (5-15 ms) after each region, then sleeps.
 *     The library does not change it (it cannot, once libgomp has loaded);
 *     the attngraph tools start with GOMP_SPINCOUNT=10000 unless
 *     OMP_WAIT_POLICY or GOMP_SPINCOUNT is set. A program that runs beside
 *     others can start with GOMP_SPINCOUNT=10000 too (docs/performance.md);
 *   - igraph's error handler, swapped in around each igraph call.
 * The library sets no umask, signal handler, locale or environment variable.
 *
 * Bits: the dense products are the library's own (no BLAS): every entry one
 * chain of multiply-adds in a fixed order, fused on the AVX2 and AVX-512
 * variants. So every result is the same bits for any thread count, process
 * count and program that loads the library, on one instruction-set variant
 * (ag_simd_isa); the products are the same bits on every CPU with FMA, the
 * attention kernels of two variants agree to rounding.
 */
#ifndef ATTNGRAPH_CORE_H
#define ATTNGRAPH_CORE_H

/* The parts, each a header of its own that includes the parts it builds on. */
#include "attngraph/base.h"
#include "attngraph/graph.h"
#include "attngraph/pattern.h"
#include "attngraph/attention.h"
#include "attngraph/model.h"
#include "attngraph/train.h"
#include "attngraph/lm.h"

#endif /* ATTNGRAPH_CORE_H */
