/* Small CSV files read whole: a header and rows of fields (the CSVs the tool writes). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/csv_table.h"
#include "base/base.h"

#define CSV_MAX_BYTES ((long)1 << 28)

void csv_free(csv_t *t)
{
    free(t->buf);
    free(t->cells);
    memset(t, 0, sizeof *t);
}

/* Splits one line (in place) into fields; quotes as RFC 4180. Returns the count. */
static int split(char *line, char **fields, int cap)
{
    int n = 0;
    char *p = line;
    for (;;) {
        char *out = p, *start = p;
        if (*p == '"') {
            for (p++;; p++) {
                if (*p == '"' && p[1] == '"')
                    *out++ = '"', p++;
                else if (*p == '"' || !*p)
                    break;
                else
                    *out++ = *p;
            }
            if (*p == '"')
                p++;
            while (*p && *p != ',')
                p++;
        } else {
            while (*p && *p != ',')
                p++;
            out = p;
        }
        const char sep = *p;
        *out = '\0';
        if (n < cap)
            fields[n] = start;
        n++;
        if (!sep)
            return n;
        p++;
    }
}

int read_all(const char *path, char **buf, size_t *len, long max, ag_error_t *err)
{
    const int from_stdin = strcmp(path, "-") == 0;
    FILE *f = from_stdin ? stdin : fopen(path, "rb");
    if (!f)
        return ag_fail(err, AG_EIO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 1;
    char *b = malloc(cap);
    *len = 0;
    while (b && n > 0) {
        if (*len + 1 == cap) {
            char *more = cap < (size_t)max ? realloc(b, cap * 2) : NULL;
            if (!more) {
                if (!from_stdin)
                    fclose(f);
                free(b);
                return ag_fail(err, AG_ELIMIT, "%s: larger than %ld bytes", path, max);
            }
            b = more, cap *= 2;
        }
        n = fread(b + *len, 1, cap - 1 - *len, f);
        *len += n;
    }
    const int bad = !b || ferror(f);
    if (!from_stdin)
        fclose(f);
    if (bad) {
        free(b);
        return ag_fail(err, AG_EIO, "%s: cannot read", path);
    }
    b[*len] = '\0';
    *buf = b;
    return AG_OK;
}

/* Parses the CSV text buf [len] (taken over: freed with t) from the file `path`. */
int csv_parse(csv_t *t, char *buf, size_t len, const char *path, ag_error_t *err)
{
    memset(t, 0, sizeof *t);
    t->path = path;
    t->buf = buf;
    if (memchr(t->buf, '\0', len)) {
        csv_free(t);
        return ag_fail(err, AG_EFORMAT, "%s: not a CSV file (it holds a NUL byte)", path);
    }
    int64_t lines = 1;
    for (size_t k = 0; k < len; k++)
        lines += t->buf[k] == '\n';
    t->cells = ag_alloc(lines * CSV_MAX_COLS + 1, sizeof *t->cells, err, "csv");
    if (!t->cells) {
        csv_free(t);
        return ag_alloc_status();
    }
    int64_t line_no = 0;
    for (char *p = t->buf, *next; p && *p; p = next) {
        next = strchr(p, '\n');
        if (next)
            *next++ = '\0';
        line_no++;
        size_t l = strlen(p);
        if (l && p[l - 1] == '\r')
            p[--l] = '\0';
        if (!l)
            continue;
        char **row = t->n_cols ? t->cells + t->n_rows * t->n_cols : t->head;
        const int n = split(p, row, CSV_MAX_COLS);
        if (!t->n_cols) {
            if (n > CSV_MAX_COLS) {
                csv_free(t);
                return ag_fail(err, AG_EFORMAT, "%s: line 1 has %d columns; expected at most %d",
                               path, n, CSV_MAX_COLS);
            }
            t->n_cols = n;
        } else if (n != t->n_cols) {
            const int cols = t->n_cols;
            csv_free(t);
            return ag_fail(err, AG_EFORMAT, "%s: line %lld has %d field%s; the header has %d",
                           path, (long long)line_no, n, AG_PLURAL(n), cols);
        } else {
            t->n_rows++;
        }
    }
    if (!t->n_cols) {
        csv_free(t);
        return ag_fail(err, AG_EFORMAT, "%s: empty; expected a header line and rows", path);
    }
    return AG_OK;
}

/* The column named name, or -1 with err naming what the file has. */
int csv_column(const csv_t *t, const char *name, int required, ag_error_t *err)
{
    for (int c = 0; c < t->n_cols; c++)
        if (strcmp(t->head[c], name) == 0)
            return c;
    if (required)
        ag_fail(err, AG_EFORMAT, "%s: no column '%s' in its header (is it the right file?)",
                t->path, name);
    return -1;
}

/* Row r's number in column c into *x: empty is NaN; anything else must parse. */
int csv_number(const csv_t *t, int64_t r, int c, double *x, ag_error_t *err)
{
    const char *s = t->cells[r * t->n_cols + c];
    if (!*s) {
        *x = NAN;
        return AG_OK;
    }
    char *end;
    errno = 0;
    *x = strtod(s, &end);
    if (*end || errno == ERANGE || isnan(*x))
        return ag_fail(err, AG_EFORMAT, "%s: row %lld: '%s' in column %s is not a number",
                       t->path, (long long)r + 1, s, t->head[c]);
    return AG_OK;
}

int csv_read(csv_t *t, const char *path, ag_error_t *err)
{
    char *buf = NULL;
    size_t len = 0;
    memset(t, 0, sizeof *t);
    int rc = read_all(path, &buf, &len, CSV_MAX_BYTES, err);
    return rc ? rc : csv_parse(t, buf, len, path, err);
}
