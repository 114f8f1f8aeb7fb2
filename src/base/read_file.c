/*
 * Reading a file whole into memory (graph files, model texts): one buffer
 * with a NUL after the bytes, so that a text can be parsed in place.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

int ag_i_read_stream(FILE *f, const char *path, const char *what, char **data, size_t *len,
                     ag_error_t *err)
{
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap + 1);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *bigger = realloc(buf, (cap *= 2) + 1);
            if (!bigger)
                free(buf);
            buf = bigger;
        }
    }
    if (!buf)
        return ag_fail(err, AG_ENOMEM, "%s: out of memory reading %s", path, what);
    if (ferror(f)) {
        free(buf);
        return ag_fail(err, AG_EIO, "%s: cannot read %s: %s", path, what, strerror(errno));
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return AG_OK;
}

int ag_i_read_text(const char *path, char **data, size_t *len, ag_error_t *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return ag_fail(err, AG_EIO, "%s: cannot read: %s", path, strerror(errno));
    const int rc = ag_i_read_stream(f, path, "it", data, len, err);
    fclose(f);
    return rc;
}
