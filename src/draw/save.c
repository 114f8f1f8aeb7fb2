/* Writing a picture whole or not at all. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "svg.h"

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

int ag_svg_save(const char *path, const char *svg, ag_error_t *err)
{
    if (!path || !*path)
        return ag_fail(err, AG_EINVAL, "picture: no file name given");
    if (!svg)
        return ag_fail(err, AG_EINVAL, "%s: no picture to write", path);
    const size_t n = strlen(svg);
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        if (S_ISDIR(st.st_mode))
            return ag_fail(err, AG_EIO, "%s: is a directory; give a file name", path);
        FILE *f = fopen(path, "w");   /* a device or FIFO: written in place */
        if (!f)
            return ag_fail(err, AG_EIO, "%s: cannot write: %s", path, strerror(errno));
        const int bad = fwrite(svg, 1, n, f) != n;
        if (fclose(f) != 0 || bad)
            return ag_fail(err, AG_EIO, "%s: write failed", path);
        return AG_OK;
    }
    /* a temporary beside the file, so the rename stays on one file system */
    const size_t len = strlen(path) + 16;
    char *tmp = ag_alloc((int64_t)len, 1, err, "picture");
    if (!tmp)
        return ag_alloc_status();
    snprintf(tmp, len, "%s.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int rc = ag_fail(err, AG_EIO, "%s: cannot create: %s", path, strerror(errno));
        free(tmp);
        return rc;
    }
    mode_t mask = umask(0);
    umask(mask);
    int rc = AG_OK;
    if (write_all(fd, svg, n) != 0)
        rc = ag_fail(err, AG_EIO, "%s: write failed: %s", path, strerror(errno));
    else if (fchmod(fd, 0666 & ~mask) != 0)
        rc = ag_fail(err, AG_EIO, "%s: cannot set its permissions: %s", path, strerror(errno));
    if (close(fd) != 0 && !rc)
        rc = ag_fail(err, AG_EIO, "%s: write failed: %s", path, strerror(errno));
    if (!rc && rename(tmp, path) != 0)
        rc = ag_fail(err, AG_EIO, "%s: cannot rename into place: %s", path, strerror(errno));
    if (rc)
        unlink(tmp);
    free(tmp);
    return rc;
}
