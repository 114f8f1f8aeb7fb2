/*
 * base/: what every folder of the library may use: failures and memory
 * (error.c), threads and BLAS (runtime.c), the deterministic dense products
 * and sums (gemm.c), the vector helpers and the counter-based generator.
 * The one header of base/ that other folders include.
 */
#ifndef AG_BASE_H
#define AG_BASE_H

#include <stdarg.h>
#include <stdio.h>
#include <sys/types.h>

#include "attngraph.h"

#if defined(__GNUC__)
#define AG_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define AG_PRINTF(f, a)
#endif

/*
 * Marks a declaration that libattngraph.so exports for libattngraph_mpi.so
 * alone (src/README.md): an interface between two libraries of one build,
 * under its ag_i_ name, with no promise to other programs.
 */
#if defined(__GNUC__)
#define AG_INTERNAL __attribute__((visibility("default")))
#else
#define AG_INTERNAL
#endif

/* "s" unless n is 1, for counts in messages: "%lld node%s", n, AG_PLURAL(n). */
#define AG_PLURAL(n) ((n) == 1 ? "" : "s")

/*
 * Below this much work (about one multiply-add each) a parallel region costs
 * more than it saves: waking threads takes microseconds, and on a loaded
 * machine a spinning thread waits for a whole time slice (300 rounds of a
 * 10-node graph took 0.5 s on 2 threads of a busy machine, 0.01 s on one).
 * Results are the same bits either way.
 */
#define AG_PARALLEL_MIN_WORK ((int64_t)1 << 16)

/*
 * The threads a parallel region of the library runs on now (share.c): the
 * calling thread's OpenMP count, or fewer while other programs keep the cores
 * busy (unless the user chose the count). It changes between calls: a
 * region's per-thread scratch is sized with the count the region runs on
 * (num_threads), read once.
 */
AG_INTERNAL
int ag_i_max_threads(void);

/* The team for a region of about ns nanoseconds of one thread's work: the
   full team for a long one (2 ms and more), else ag_i_max_threads. Rough
   costs: 0.02 ns a multiply-add in the products and the tiled kernels, 0.5
   in the gather and generic kernels (scattered rows). */
AG_INTERNAL
int ag_i_team(double ns);
#define AG_I_NS_DENSE 0.02
#define AG_I_NS_SCATTERED 0.5

/* 0 where the program cannot start itself again with execv(/proc/self/exe):
   under valgrind. */
int ag_i_can_restart(void);

/* Who chose the OpenMP count (ag_set_threads): the default (the cores, or
   OMP_NUM_THREADS), the user (kept as it is), or a tool's default (the most
   the team takes). */
enum { AG_I_THREADS_DEFAULT = 0, AG_I_THREADS_USER, AG_I_THREADS_TOOL };
AG_INTERNAL
void ag_i_threads_choice(int choice);
/* 1 when the team may shrink below the calling thread's OpenMP count (nobody
   fixed the count), else 0. */
int ag_i_threads_adapt(void);
/* The OpenMP count when the library loaded: the cores, or OMP_NUM_THREADS's. */
int ag_i_default_threads(void);
/* ag_set_threads for a tool's default count (threads > 0): the most the team
   takes, adapting below it. */
AG_INTERNAL
int ag_i_set_tool_threads(int threads);

/* ag_fail, ag_alloc, ag_calloc and ag_alloc_status, the failures and the
   budget-checked allocations, are public (attngraph/base.h): the tools use
   them as the library does. */
/* realloc of p to n elements under the budget, as ag_alloc: on failure p is
   left as it was (and NULL returned). */
void *ag_i_realloc(void *p, int64_t n, size_t size, ag_error_t *err, const char *what);
/* Why the last allocation of this thread failed, in words ("out of memory",
   "over the memory budget"), for messages beside ag_alloc_status. */
const char *ag_i_alloc_reason(void);

/* Puts "PREFIX: " (printf's fmt) before err's message when rc is a failure
   and err is not NULL; returns rc. */
int ag_i_fail_prefix(int rc, ag_error_t *err, const char *fmt, ...) AG_PRINTF(3, 4);
int ag_i_fail_prefix_v(int rc, ag_error_t *err, const char *fmt, va_list ap);

/* ag_alloc aligned to a 64-byte cache line (free with free()): vectors then
   never straddle two lines. */
void *ag_i_alloc_lines(int64_t n, size_t size, ag_error_t *err, const char *what);

/* In a sorted a[0..n), how many elements are below x (the first >= x). */
static inline int64_t ag_i_count_below(const int64_t *a, int64_t n, int64_t x)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (a[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* In a sorted a[0..n), the index of the last element <= x (0 if there is none). */
static inline int64_t ag_i_last_at_most(const int64_t *a, int64_t n, int64_t x)
{
    int64_t lo = 0, hi = n;
    while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (a[mid] <= x)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/*
 * igraph calls: between ag_i_igraph_enter() and ag_i_igraph_leave() igraph errors
 * are recorded instead of aborting, and warnings are dropped. The host's
 * handlers are restored on leave. Not reentrant, like igraph itself.
 */
void ag_i_igraph_enter(void);
void ag_i_igraph_leave(void);
/* Sets igraph's C attribute table unless one is set: a graph created
   before it has no attribute storage, and setting attributes on it crashes. */
void ag_i_igraph_use_attributes(void);
/* The reason of the last igraph error inside the guard ("" if none). */
const char *ag_i_igraph_reason(void);

/* ---- files read whole (read_file.c) ---- */

/* All of f into a malloc'ed buffer with a NUL after its *len bytes; path and
   what (e.g. "standard input") name it in messages. */
int ag_i_read_stream(FILE *f, const char *path, const char *what, char **data, size_t *len,
                     ag_error_t *err);
/* The file at path, the same way. */
int ag_i_read_text(const char *path, char **data, size_t *len, ag_error_t *err);

/* ---- files written whole or not at all (whole_file.c says how) ---- */

typedef struct {
    char final[4096];  /* the file a finished temporary replaces (absolute, links followed) */
    char tmp[4096];    /* the temporary's name, or its template; "" when none */
    char path[4096];   /* where writers write: /dev/fd/<fd>, or the file itself when direct */
    int fd;            /* the temporary, open from creation to commit or abort; -1: none */
    int anon;          /* unnamed (O_TMPFILE) until commit: a process killed by any
                          signal, even SIGKILL, leaves nothing */
    int direct;        /* a device, FIFO or socket: written in place, never replaced */
    int have_id;       /* the file exists: dev and ino identify it */
    dev_t dev;
    ino_t ino;
    mode_t mode;       /* the permissions the result gets */
    int slot;          /* 1 + its place in the registry of named temporaries; 0: none */
} ag_i_file_t;

/* Finds what target names (symlinks followed) and refuses a directory or an
   existing file that is not writable; creates nothing. option ("--out", or
   NULL) names the file in messages beside the target. */
int ag_i_file_resolve(ag_i_file_t *f, const char *target, const char *option, ag_error_t *err);
/* Creates the temporary: from the template in f->tmp (six trailing X), or
   beside f->final; f->path then names it. Nothing for a direct file. */
int ag_i_file_create(ag_i_file_t *f, const char *option, const char *target, ag_error_t *err);
/* ag_i_file_resolve, then ag_i_file_create. */
int ag_i_file_open(ag_i_file_t *f, const char *target, const char *option, ag_error_t *err);
/* Gives the temporary the permissions of the result (nothing is replaced yet). */
int ag_i_file_set_mode(ag_i_file_t *f, const char *target, ag_error_t *err);
/* Renames the temporary onto its file. */
int ag_i_file_place(ag_i_file_t *f, const char *target, ag_error_t *err);
/* ag_i_file_set_mode and ag_i_file_place; on failure the temporary is removed. */
int ag_i_file_commit(ag_i_file_t *f, const char *target, ag_error_t *err);
/* Removes the temporary; the file itself is never touched. */
void ag_i_file_abort(ag_i_file_t *f);
/* Removes the named temporaries when SIGINT, SIGTERM, SIGHUP or SIGPIPE ends
   the process (then the signal takes its default course); a signal the
   process ignores stays ignored. A process-wide choice: the command-line
   tool's, never the library's. */
void ag_i_file_cleanup_on_signals(void);
/* "OPTION TARGET" into buf [cap] for messages, or TARGET alone (option NULL). */
const char *ag_i_file_named(char *buf, size_t cap, const char *option, const char *target);
/* Names target where err's message names path (a temporary's /dev/fd/N). */
void ag_i_file_name_in_message(ag_error_t *err, const char *path, const char *target);

/* ---- folders written whole (folder.c) ---- */

/* One file of a folder: float32 of ndim dimensions, int64 of ndim (0: [shape[0]];
   i64 set), or a line of text (text set). */
typedef struct {
    const char *name;          /* "dwq.npy", or in a subfolder "round-2/dwq.npy" */
    const float *f32;
    const int64_t *i64;
    int ndim;
    int64_t shape[3];
    const char *text;
} ag_i_folder_item_t;

/* Refuses, before any work, a folder that cannot be written or created (its
   parent missing), a file in its place, and "-". option ("--save", or NULL)
   names the folder in messages beside its name. */
int ag_i_folder_check(const char *dir, const char *option, ag_error_t *err);
/*
 * Writes items into dir (created if missing, with the subfolders the names
 * have): each file through a temporary, all renamed into place once all are
 * written. On failure nothing is replaced and the folders it made are removed.
 */
int ag_i_folder_write(const char *dir, const char *option, const ag_i_folder_item_t *items,
                      int n, ag_error_t *err);

#include "base/gemm.h"
#include "base/simd_level.h"
#include "base/rng.h"
#include "base/vec.h"

#endif
