/* Error reporting, checked allocation and the igraph error guard. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

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

void *ag_alloc(int64_t n, size_t size, ag_error_t *err, const char *what)
{
    if (n < 0 || (n > 0 && (uint64_t)n > SIZE_MAX / size)) {
        ag_fail(err, AG_ENOMEM, "%s: %lld elements of %zu bytes do not fit in memory",
                what, (long long)n, size);
        return NULL;
    }
    void *p = malloc(n ? (size_t)n * size : 1);
    if (!p)
        ag_fail(err, AG_ENOMEM, "%s: out of memory allocating %.3g MB", what,
                (double)n * (double)size / 1e6);
    return p;
}

void *ag_alloc_lines(int64_t n, size_t size, ag_error_t *err, const char *what)
{
    if (n < 0 || (n > 0 && (uint64_t)n > (SIZE_MAX - 64) / size)) {
        ag_fail(err, AG_ENOMEM, "%s: %lld elements of %zu bytes do not fit in memory",
                what, (long long)n, size);
        return NULL;
    }
    const size_t bytes = ((size_t)n * size + 63) / 64 * 64;
    void *p = aligned_alloc(64, bytes ? bytes : 64);
    if (!p)
        ag_fail(err, AG_ENOMEM, "%s: out of memory allocating %.3g MB", what, (double)bytes / 1e6);
    return p;
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

void ag_igraph_enter(void)
{
    igraph_reason[0] = '\0';
    igraph_reason_is_real = 0;
    host_error_handler = igraph_set_error_handler(record_error);
    host_warning_handler = igraph_set_warning_handler(drop_warning);
}

void ag_igraph_leave(void)
{
    igraph_set_error_handler(host_error_handler);
    igraph_set_warning_handler(host_warning_handler);
}

const char *ag_igraph_reason(void)
{
    return igraph_reason;
}

void ag_igraph_use_attributes(void)
{
    if (!igraph_has_attribute_table())
        igraph_set_attribute_table(&igraph_cattribute_table);
}
