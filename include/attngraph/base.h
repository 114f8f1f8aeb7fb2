/*
 * attngraph: the version, errors, and the machine (threads, memory,
 * instruction set).
 * A part of <attngraph/core.h>, which includes them all and states the
 * conventions.
 */
#ifndef ATTNGRAPH_BASE_H
#define ATTNGRAPH_BASE_H

#include <stddef.h>
#include <stdint.h>

/* Every header's declarations sit between these: C linkage for C++, and the
   symbols the shared library exports (it is built with -fvisibility=hidden:
   what the headers declare and nothing else). */
#if defined(__GNUC__)
#define AG_VISIBLE_PUSH_ _Pragma("GCC visibility push(default)")
#define AG_VISIBLE_POP_ _Pragma("GCC visibility pop")
#else
#define AG_VISIBLE_PUSH_
#define AG_VISIBLE_POP_
#endif
#ifdef __cplusplus
#define AG_BEGIN_DECLS extern "C" { AG_VISIBLE_PUSH_
#define AG_END_DECLS AG_VISIBLE_POP_ }
#else
#define AG_BEGIN_DECLS AG_VISIBLE_PUSH_
#define AG_END_DECLS AG_VISIBLE_POP_
#endif

AG_BEGIN_DECLS

#define AG_VERSION "0.2.0"
/* The version of the library loaded: its build's AG_VERSION (a program or a
   binding built against other headers can tell; Python refuses to load one
   other than its own). */
const char *ag_version(void);

/* ---------------------------------------------------------------- errors */

typedef enum {
    AG_OK = 0,
    AG_ENOMEM,   /* out of memory */
    AG_EIO,      /* a file could not be opened, read or written */
    AG_EFORMAT,  /* a file's contents are malformed */
    AG_EINVAL,   /* a value is out of range or shapes disagree */
    AG_ELIMIT,   /* the input asks for more than the configured limit */
    AG_EIGRAPH   /* igraph reported an error */
} ag_status_t;

typedef struct {
    ag_status_t status;
    char msg[512];
} ag_error_t;

/* A round callback's request to stop early (see ag_round_opts_t). */
#define AG_STOP (-1)

/* Name of a status, e.g. "bad format". */
const char *ag_status_str(ag_status_t status);

/*
 * For code that reports failures as the library does (the tools, an
 * extension): fills err (when not NULL) with status and the one line fmt
 * formats (cut to err->msg's size), and returns status.
 */
int ag_fail(ag_error_t *err, ag_status_t status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/*
 * n elements of size bytes under the memory budget (ag_set_memory_budget), or
 * NULL with err naming `what`: refused over the budget (AG_ELIMIT) or failed
 * (AG_ENOMEM); ag_alloc_status() then says which, for the caller's return.
 * ag_calloc zeroes them. Free with free().
 */
void *ag_alloc(int64_t n, size_t size, ag_error_t *err, const char *what);
void *ag_calloc(int64_t n, size_t size, ag_error_t *err, const char *what);
int ag_alloc_status(void);

/* ---------------------------------------------------------------- machine */

/*
 * The memory budget: every array the library allocates is checked against it
 * before the allocation is tried, and one that would need more is refused:
 * the call returns AG_ELIMIT (err or not), with a message naming what it was
 * for, the bytes it needs and the budget. 0 (the default) means the machine's available memory at the
 * time (MemAvailable). ag_set_memory_budget returns the previous setting;
 * ag_memory_budget the budget in force now, in bytes.
 */
int64_t ag_set_memory_budget(int64_t bytes);
int64_t ag_memory_budget(void);

/*
 * The vector instruction set the kernels run: "avx512", "avx2" or "base" (the
 * x86-64 baseline). The best this CPU has, unless the environment's AG_SIMD
 * names a lower one (base, avx2 or avx512), read at the first kernel call:
 * every variant can be measured on one machine. An AG_SIMD the CPU cannot run,
 * or that names no variant, is not used; ag_simd_env_check says why (the CLI
 * and Python refuse it).
 */
const char *ag_simd_isa(void);
int ag_simd_env_check(ag_error_t *err);

/* Sets the threads of the kernels and products (OpenMP): a count
   (kept as it is), or 0 or less: the default, the OpenMP count when the
   library loaded (OMP_NUM_THREADS's, else every core), fewer while other
   programs keep the cores busy. Returns the most threads a call uses (1
   without OpenMP). */
int ag_set_threads(int threads);

AG_END_DECLS

#endif /* ATTNGRAPH_BASE_H */
