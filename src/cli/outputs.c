/* Output files that appear whole or not at all. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "internal.h"

int out_open(out_file_t *o, const char *target, ag_error_t *err)
{
    o->target = target;
    o->tmp[0] = '\0';
    if (!target)
        return AG_OK;
    const char *slash = strrchr(target, '/');
    int dir_len = slash ? (int)(slash - target + 1) : 0;
    if (snprintf(o->tmp, sizeof o->tmp, "%.*s.%s.XXXXXX", dir_len, target,
                 slash ? slash + 1 : target) >= (int)sizeof o->tmp) {
        o->tmp[0] = '\0';
        return ag_fail(err, AG_EIO, "%s: path is too long", target);
    }
    int fd = mkstemp(o->tmp);
    if (fd < 0) {
        o->tmp[0] = '\0';
        return ag_fail(err, AG_EIO, "%s: cannot create: %s", target, strerror(errno));
    }
    /* mkstemp makes 0600; give the file the permissions a plain fopen would. */
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    close(fd);
    return AG_OK;
}

int out_commit(out_file_t *o, ag_error_t *err)
{
    if (!o->target || !o->tmp[0])
        return AG_OK;
    if (rename(o->tmp, o->target) != 0)
        return ag_fail(err, AG_EIO, "%s: cannot rename into place: %s", o->target,
                       strerror(errno));
    o->tmp[0] = '\0';
    return AG_OK;
}

void out_abort(out_file_t *o)
{
    if (!o->target)
        return;
    if (o->tmp[0])
        unlink(o->tmp);
    o->tmp[0] = '\0';
    unlink(o->target);
}
