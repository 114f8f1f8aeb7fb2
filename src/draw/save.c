/* Writing a picture whole or not at all. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
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

/* Creates a fresh file tmp = "path.XXXXXX" (len bytes of room) beside path,
   with the permissions fopen would give it (0666 less the umask: open applies
   the umask itself, so the library neither reads nor sets that process-wide
   setting, as mkstemp's 0600 and a fchmod would need). The descriptor, or -1
   with errno. */
static int create_beside(char *tmp, size_t len, const char *path)
{
    static unsigned long calls;
    unsigned long r = (unsigned long)getpid() * 2654435761u ^ (unsigned long)time(NULL) ^
                      __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED) * 0x9e3779b9u;
    for (int tries = 0; tries < 100; tries++) {
        snprintf(tmp, len, "%s.%06lx", path, r >> 40 & 0xffffff);
        const int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST)
            return fd;
        r = r * 6364136223846793005u + 1442695040888963407u;
    }
    errno = EEXIST;
    return -1;
}

int ag_svg_save(const char *path, const char *svg, ag_error_t *err)
{
    if (!path || !*path)
        return ag_i_fail(err, AG_EINVAL, "picture: no file name given");
    if (!svg)
        return ag_i_fail(err, AG_EINVAL, "%s: no picture to write", path);
    const size_t n = strlen(svg);
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        if (S_ISDIR(st.st_mode))
            return ag_i_fail(err, AG_EIO, "%s: is a directory; give a file name", path);
        FILE *f = fopen(path, "w");   /* a device or FIFO: written in place */
        if (!f)
            return ag_i_fail(err, AG_EIO, "%s: cannot write: %s", path, strerror(errno));
        const int bad = fwrite(svg, 1, n, f) != n;
        if (fclose(f) != 0 || bad)
            return ag_i_fail(err, AG_EIO, "%s: write failed", path);
        return AG_OK;
    }
    /* a temporary beside the file, so the rename stays on one file system */
    const size_t len = strlen(path) + 16;
    char *tmp = ag_i_alloc((int64_t)len, 1, err, "picture");
    if (!tmp)
        return ag_i_alloc_status();
    int fd = create_beside(tmp, len, path);
    if (fd < 0) {
        int rc = ag_i_fail(err, AG_EIO, "%s: cannot create: %s", path, strerror(errno));
        free(tmp);
        return rc;
    }
    int rc = AG_OK;
    if (write_all(fd, svg, n) != 0)
        rc = ag_i_fail(err, AG_EIO, "%s: write failed: %s", path, strerror(errno));
    if (close(fd) != 0 && !rc)
        rc = ag_i_fail(err, AG_EIO, "%s: write failed: %s", path, strerror(errno));
    if (!rc && rename(tmp, path) != 0)
        rc = ag_i_fail(err, AG_EIO, "%s: cannot rename into place: %s", path, strerror(errno));
    if (rc)
        unlink(tmp);
    free(tmp);
    return rc;
}
