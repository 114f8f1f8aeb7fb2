/* Error reporting, checked allocation and the igraph error guard. */
#define _DEFAULT_SOURCE   /* MADV_HUGEPAGE */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/mman.h>

#include "base/base.h"

/*
 * Large arrays (graphs of millions of nodes, their Q, K, V) come in 2 MB
 * pages where the kernel allows it: the gather kernel reads rows at random,
 * and with 4 KB pages nearly every read also missed the TLB; the tiled kernel
 * ran 3-6% faster on 8 MB arrays; the kernel also clears one huge page faster
 * than 512 small ones. From 4 MB, rounding up to whole pages wastes at most a third.
 */
#define HUGE_FROM ((size_t)4 << 20)
#define HUGE_PAGE ((size_t)2 << 20)

static void *alloc_bytes(size_t bytes, size_t align)
{
    if (bytes > SIZE_MAX / 2)   /* no machine has it; and the rounding below must not wrap */
        return NULL;
#ifdef MADV_HUGEPAGE
    if (bytes >= HUGE_FROM) {
        bytes = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
        void *p = aligned_alloc(HUGE_PAGE, bytes);
        if (p)
            madvise(p, bytes, MADV_HUGEPAGE);   /* advice only: failure is harmless */
        return p;
    }
#endif
    return align > 16 ? aligned_alloc(align, (bytes + align - 1) / align * align)
                      : malloc(bytes ? bytes : 1);
}

const char *ag_status_str(ag_status_t status)
{
    switch (status) {
    case AG_OK: return "ok";
    case AG_ENOMEM: return "out of memory";
    case AG_EIO: return "i/o error";
    case AG_EFORMAT: return "bad format";
    case AG_EINVAL: return "invalid value";
    case AG_ELIMIT: return "limit exceeded";
    case AG_EIGRAPH: return "igraph error";
    }
    return "unknown status";
}

int ag_fail(ag_error_t *err, ag_status_t status, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->status = status;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return status;
}

int ag_i_fail_prefix_v(int rc, ag_error_t *err, const char *fmt, va_list ap)
{
    if (!rc || !err)
        return rc;
    char prefix[sizeof err->msg], why[sizeof err->msg];
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    snprintf(why, sizeof why, "%s", err->msg);
    return ag_fail(err, (ag_status_t)rc, "%s: %s", prefix, why);
}

int ag_i_fail_prefix(int rc, ag_error_t *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rc = ag_i_fail_prefix_v(rc, err, fmt, ap);
    va_end(ap);
    return rc;
}

/* ---- the memory budget ---- */

static int64_t budget_set;   /* 0: the machine's available memory */

/* MemAvailable of /proc/meminfo in bytes, or INT64_MAX when it cannot be read. */
static int64_t available_memory(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    long long kb = -1;
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb > 0 ? (int64_t)kb * 1024 : INT64_MAX;
}

/* One number for the process, read and set atomically (any thread may). */
int64_t ag_set_memory_budget(int64_t bytes)
{
    return __atomic_exchange_n(&budget_set, bytes > 0 ? bytes : 0, __ATOMIC_RELAXED);
}

int64_t ag_memory_budget(void)
{
    const int64_t set = __atomic_load_n(&budget_set, __ATOMIC_RELAXED);
    return set > 0 ? set : available_memory();
}

/* The status of this thread's last failed allocation (AG_ENOMEM until one fails). */
static _Thread_local ag_status_t alloc_failure = AG_ENOMEM;

int ag_alloc_status(void)
{
    return alloc_failure;
}

/* Refuses (AG_ELIMIT) bytes over the budget, before anything is tried. */
static int within_budget(double bytes, ag_error_t *err, const char *what)
{
    /* small and no budget set: not worth reading /proc; a budget that was set
       is a number in memory, and holds for every array */
    if (bytes < (double)((int64_t)64 << 20) && !__atomic_load_n(&budget_set, __ATOMIC_RELAXED))
        return 1;
    const int64_t budget = ag_memory_budget();
    if (bytes <= (double)budget)
        return 1;
    alloc_failure = AG_ELIMIT;
    ag_fail(err, AG_ELIMIT, "%s needs %.3g GB; the memory budget is %.3g GB (%s)", what,
            bytes / 1e9, (double)budget / 1e9,
            budget_set ? "as set" : "the memory available now; raise --max-memory to try");
    return 0;
}

/* The bytes of n elements of size bytes each, rounded up to a multiple of
   unit, in *bytes when they fit in memory and in the budget; else 0, the
   failure recorded. */
static int sized(int64_t n, size_t size, size_t unit, size_t *bytes, ag_error_t *err,
                 const char *what)
{
    if (size == 0)
        size = 1;   /* an element of no bytes takes a byte: no division by zero */
    if (n < 0 || (n > 0 && (uint64_t)n > (SIZE_MAX - unit) / size)) {
        alloc_failure = AG_ENOMEM;
        ag_fail(err, AG_ENOMEM, "%s: %lld elements of %zu bytes do not fit in memory",
                what, (long long)n, size);
        return 0;
    }
    *bytes = ((size_t)n * size + unit - 1) / unit * unit;
    return within_budget((double)*bytes, err, what);
}

/* p, or NULL with the failure recorded when the allocation of bytes failed. */
static void *allocated(void *p, size_t bytes, ag_error_t *err, const char *what)
{
    if (!p) {
        alloc_failure = AG_ENOMEM;
        ag_fail(err, AG_ENOMEM, "%s: out of memory allocating %.3g MB", what,
                (double)bytes / 1e6);
    }
    return p;
}

void *ag_alloc(int64_t n, size_t size, ag_error_t *err, const char *what)
{
    size_t bytes;
    if (!sized(n, size, 1, &bytes, err, what))
        return NULL;
    return allocated(alloc_bytes(bytes, 16), bytes, err, what);
}

void *ag_i_alloc_lines(int64_t n, size_t size, ag_error_t *err, const char *what)
{
    size_t bytes;
    if (!sized(n, size, 64, &bytes, err, what))
        return NULL;
    return allocated(alloc_bytes(bytes ? bytes : 64, 64), bytes, err, what);
}

void *ag_i_realloc(void *p, int64_t n, size_t size, ag_error_t *err, const char *what)
{
    size_t bytes;
    if (!sized(n, size, 1, &bytes, err, what))
        return NULL;
    return allocated(realloc(p, bytes ? bytes : 1), bytes, err, what);
}

const char *ag_i_alloc_reason(void)
{
    return alloc_failure == AG_ELIMIT ? "over the memory budget" : "out of memory";
}

void *ag_calloc(int64_t n, size_t size, ag_error_t *err, const char *what)
{
    void *p = ag_alloc(n, size, err, what);
    if (p)
        memset(p, 0, n ? (size_t)n * size : 1);
    return p;
}

/* ---- igraph guard ---- */

static char igraph_reason[400];
static int igraph_reason_is_real;   /* 0 while the reason is only igraph_strerror's */
static igraph_error_handler_t *host_error_handler;
static igraph_warning_handler_t *host_warning_handler;

/* igraph calls the handler once per unwinding level; keep the first real reason. */
static void record_error(const char *reason, const char *file, int line, igraph_error_t code)
{
    (void)file;
    (void)line;
    if (!igraph_reason_is_real && reason && reason[0]) {
        snprintf(igraph_reason, sizeof igraph_reason, "%s", reason);
        igraph_reason_is_real = 1;
    } else if (igraph_reason[0] == '\0') {
        snprintf(igraph_reason, sizeof igraph_reason, "%s", igraph_strerror(code));
    }
    IGRAPH_FINALLY_FREE();
}

static void drop_warning(const char *reason, const char *file, int line)
{
    (void)reason;
    (void)file;
    (void)line;
}

void ag_i_igraph_enter(void)
{
    igraph_reason[0] = '\0';
    igraph_reason_is_real = 0;
    host_error_handler = igraph_set_error_handler(record_error);
    host_warning_handler = igraph_set_warning_handler(drop_warning);
}

void ag_i_igraph_leave(void)
{
    igraph_set_error_handler(host_error_handler);
    igraph_set_warning_handler(host_warning_handler);
}

const char *ag_i_igraph_reason(void)
{
    return igraph_reason;
}

void ag_i_igraph_use_attributes(void)
{
    if (!igraph_has_attribute_table())
        igraph_set_attribute_table(&igraph_cattribute_table);
}
