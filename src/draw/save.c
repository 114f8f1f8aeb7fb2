/* Writing a picture whole or not at all (base/whole_file.c). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "draw/svg.h"

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
    ag_i_file_t f;
    int rc = ag_i_file_open(&f, path, NULL, err);
    if (rc)
        return rc;
    /* a device or FIFO is written in place */
    const int fd = f.direct ? open(f.final, O_WRONLY | O_TRUNC | O_CLOEXEC) : f.fd;
    if (fd < 0)
        return ag_fail(err, AG_EIO, "%s: cannot write: %s", path, strerror(errno));
    if (write_all(fd, svg, strlen(svg)) != 0)
        rc = ag_fail(err, AG_EIO, "%s: write failed: %s", path, strerror(errno));
    if (f.direct) {
        if (close(fd) != 0 && !rc)
            rc = ag_fail(err, AG_EIO, "%s: write failed: %s", path, strerror(errno));
        return rc;
    }
    if (rc) {
        ag_i_file_abort(&f);
        return rc;
    }
    return ag_i_file_commit(&f, path, err);
}
