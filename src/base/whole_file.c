#define _GNU_SOURCE   /* O_TMPFILE; realpath */
/*
 * Files that appear whole or not at all, and never clobber what is not
 * theirs: the one writer of the CLI's outputs (cli/outputs.c) and of the
 * library's pictures (ag_svg_save).
 *
 * A regular file (or a name not there yet) is written to a temporary beside
 * it and renamed into place at commit, so a reader never sees half a file and
 * a failure leaves the old one exactly as it was. A symlink is followed: the
 * temporary goes beside the file it names and the link stays a link. Anything
 * else (a character device such as /dev/null, a FIFO, a socket) is written in
 * place: renaming over it would replace the device node with a plain file. An
 * existing file that is not writable is refused, as a plain write would
 * refuse it; the result keeps an existing file's permissions, and a new one
 * gets what open(2) with 0666 gives (the umask applied by the kernel: the
 * library neither reads nor sets that process-wide setting).
 *
 * A temporary stays open from creation to commit or abort, and writers open
 * it as /dev/fd/<fd>, the same inode: a name swapped for a symlink in a shared
 * directory in between is never followed. Where the file system allows, it is
 * unnamed (O_TMPFILE) until commit, so a process killed by any signal leaves
 * nothing; a named one is kept in a registry that ag_i_file_cleanup_on_signals
 * (the command-line tool's choice, not the library's) removes on SIGINT,
 * SIGTERM, SIGHUP and SIGPIPE.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"

/* ---- the registry of named temporaries (read by the signal handler) ---- */

#define MAX_LIVE 64
static const char *volatile live[MAX_LIVE];
/* Set by the handler before it unlinks: the handler may run on another thread
   (OpenMP's threads take signals too) while this one is naming a
   temporary, so a name made after the unlinks must remove itself. */
static volatile sig_atomic_t dying;

static void remove_temporaries(int sig)
{
    dying = 1;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    for (int i = 0; i < MAX_LIVE; i++) {
        const char *p = live[i];
        if (p)
            unlink(p);
    }
    /* SA_RESETHAND restored the default action; the signal is blocked until we
       return, then it ends the process as if we had never caught it. */
    raise(sig);
}

void ag_i_file_cleanup_on_signals(void)
{
    static int installed;
    if (installed)
        return;
    installed = 1;
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
    for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++) {
        struct sigaction old, sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = remove_temporaries;
        sa.sa_flags = SA_RESETHAND;
        sigemptyset(&sa.sa_mask);
        /* an ignored signal (nohup, a background job) stays ignored */
        if (sigaction(sigs[k], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaction(sigs[k], &sa, NULL);
    }
}

/* Takes a free slot for name (1 + its index), or 0 when all are taken. */
static int enter(const char *name)
{
    for (int i = 0; i < MAX_LIVE; i++) {
        const char *none = NULL;
        if (__atomic_compare_exchange_n(&live[i], &none, name, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST))
            return i + 1;
    }
    return 0;
}

static void forget(ag_i_file_t *f)
{
    if (f->slot > 0)
        __atomic_store_n(&live[f->slot - 1], NULL, __ATOMIC_SEQ_CST);
    f->slot = 0;
}

/* ---- resolving the target ---- */

/* "dir" + "/" + "base" into out (cap 4096); nonzero when it does not fit. */
static int join(char *out, const char *dir, const char *base)
{
    int n = snprintf(out, 4096, "%s%s%s", dir, *dir && dir[strlen(dir) - 1] == '/' ? "" : "/",
                     base);
    return n >= 4096;
}

/* "OPTION TARGET" or "TARGET": how messages name the file. */
const char *ag_i_file_named(char *buf, size_t cap, const char *option, const char *target)
{
    snprintf(buf, cap, "%s%s%s", option ? option : "", option ? " " : "", target);
    return buf;
}

int ag_i_file_resolve(ag_i_file_t *f, const char *target, const char *option,
                      ag_error_t *err)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    struct stat st;
    char who[4200];
    if (stat(target, &st) == 0) {
        f->have_id = 1, f->dev = st.st_dev, f->ino = st.st_ino;
        if (S_ISDIR(st.st_mode))
            return ag_fail(err, AG_EIO, "%s: is a directory; give a file name", target);
        if (!S_ISREG(st.st_mode)) {
            f->direct = 1;
            snprintf(f->final, sizeof f->final, "%s", target);
            snprintf(f->path, sizeof f->path, "%s", target);
            return AG_OK;
        }
        /* rename ignores the file's mode: refuse what a plain write would */
        if (access(target, W_OK) != 0)
            return ag_fail(err, AG_EIO, "%s: cannot write: %s", target, strerror(errno));
        char real[PATH_MAX];
        if (!realpath(target, real))
            return ag_fail(err, AG_EIO, "%s: %s", target, strerror(errno));
        snprintf(f->final, sizeof f->final, "%s", real);
        f->mode = st.st_mode & 07777;
        return AG_OK;
    }
    if (errno != ENOENT)
        return ag_fail(err, AG_EIO, "%s: %s", target, strerror(errno));
    /* Not there: a new name, or a symlink to a file not yet there. */
    char cur[4096], link[4096], next[4096];
    snprintf(cur, sizeof cur, "%s", target);
    for (int hops = 0;; hops++) {
        struct stat ls;
        if (lstat(cur, &ls) != 0 || !S_ISLNK(ls.st_mode))
            break;
        ssize_t n = readlink(cur, link, sizeof link - 1);
        if (hops == 40 || n < 0)
            return ag_fail(err, AG_EIO, "%s: %s", target, strerror(hops == 40 ? ELOOP : errno));
        link[n] = '\0';
        char *slash = strrchr(cur, '/');
        if (link[0] == '/' || !slash) {
            snprintf(next, sizeof next, "%s", link);
        } else {
            slash[1] = '\0';
            if (join(next, cur, link))
                return ag_fail(err, AG_EIO, "%s: path is too long", target);
        }
        memcpy(cur, next, sizeof cur);
    }
    char dir[4096], real[PATH_MAX];
    const char *slash = strrchr(cur, '/'), *base = slash ? slash + 1 : cur;
    if (!*base)
        return ag_fail(err, AG_EIO, "%s: is a directory; give a file name", target);
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - cur) + 1 : 1, slash ? cur : ".");
    if (!realpath(dir, real))
        return ag_fail(err, AG_EIO, "%s: cannot create: %s",
                       ag_i_file_named(who, sizeof who, option, target), strerror(errno));
    if (join(f->final, real, base))
        return ag_fail(err, AG_EIO, "%s: path is too long", target);
    f->mode = (mode_t)-1;   /* a new file: what creating the temporary gives */
    return AG_OK;
}

/* ---- the temporary ---- */

/* Gives the temporary a fresh name from the template in f->tmp (its last six
   characters replaced): a new file opened with 0666 (fd < 0), or a link to the
   unnamed file fd. The name is registered before it exists (unlinking a name
   not yet made is harmless; blocking signals would not do, as other threads
   may take them). Returns the descriptor, or -1 with errno. */
static int make_name(ag_i_file_t *f, int fd)
{
    const int slot = enter(f->tmp);
    if (!slot) {
        errno = EMFILE;
        return -1;
    }
    f->slot = slot;
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    static const char abc[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    static unsigned long calls;
    unsigned long r = (unsigned long)getpid() * 2654435761u ^ (unsigned long)time(NULL) ^
                      __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED) * 0x9e3779b9u;
    const size_t x = strlen(f->tmp) - 6;
    int made = -1;
    for (int tries = 0; tries < 100 && made < 0; tries++) {
        for (size_t k = 0; k < 6; k++, r = r * 6364136223846793005u + 1442695040888963407u)
            f->tmp[x + k] = abc[(r >> 33) % (sizeof abc - 1)];
        made = fd < 0 ? open(f->tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666)
                      : linkat(AT_FDCWD, proc, AT_FDCWD, f->tmp, AT_SYMLINK_FOLLOW);
        if (made < 0 && errno != EEXIST)
            break;
    }
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (dying) {                /* the handler may have unlinked before the name existed */
        if (made >= 0)
            unlink(f->tmp);
        for (;;)
            pause();            /* the handler is ending the process */
    }
    if (made < 0) {
        const int e = errno;
        forget(f);
        errno = e;
        return -1;
    }
    return fd < 0 ? made : fd;
}

int ag_i_file_create(ag_i_file_t *f, const char *option, const char *target, ag_error_t *err)
{
    char who[4200];
    if (f->direct)
        return AG_OK;
    if (!f->tmp[0]) {   /* beside the file, so the rename stays on one file system */
        const char *slash = strrchr(f->final, '/');   /* final is absolute */
        if (snprintf(f->tmp, sizeof f->tmp, "%.*s.%s.XXXXXX", (int)(slash - f->final + 1),
                     f->final, slash + 1) >= (int)sizeof f->tmp) {
            f->tmp[0] = '\0';
            return ag_fail(err, AG_EIO, "%s: path is too long", target);
        }
    }
    int fd = -1;
#ifdef O_TMPFILE
    /* An unnamed file in the temporary's directory: it vanishes with the
       process, whatever ends it; commit names it only to rename it. */
    const char *slash = strrchr(f->tmp, '/');
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - f->tmp) + 1 : 1, slash ? f->tmp : ".");
    fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0666);
    f->anon = fd >= 0;
#endif
    if (fd < 0 && (fd = make_name(f, -1)) < 0) {
        const int e = errno;
        f->tmp[0] = '\0';
        return ag_fail(err, AG_EIO, "%s: cannot create: %s",
                       ag_i_file_named(who, sizeof who, option, target),
                       e == EMFILE && !f->slot ? "too many files being written at once"
                                                 : strerror(e));
    }
    f->fd = fd;
    snprintf(f->path, sizeof f->path, "/dev/fd/%d", fd);
    /* A new file's mode is what open gave the temporary (0666 less the umask).
       Until commit the temporary is the owner's alone, and writable by the
       owner so that writers can open it again by /dev/fd (a mode without the
       owner's write bit would stop them). */
    struct stat st;
    if (f->mode == (mode_t)-1)
        f->mode = fstat(fd, &st) == 0 ? st.st_mode & 07777 : 0644;
    if (fchmod(fd, 0600) != 0) {
        const int e = errno;
        ag_i_file_abort(f);
        return ag_fail(err, AG_EIO, "%s: cannot create: %s",
                       ag_i_file_named(who, sizeof who, option, target), strerror(e));
    }
    return AG_OK;
}

int ag_i_file_open(ag_i_file_t *f, const char *target, const char *option, ag_error_t *err)
{
    int rc = ag_i_file_resolve(f, target, option, err);
    return rc ? rc : ag_i_file_create(f, option, target, err);
}

/* Closes and forgets the temporary, removing its name first when `remove`. */
static void release(ag_i_file_t *f, int remove)
{
    if (remove && f->tmp[0] && !f->anon)   /* an unnamed one goes with its descriptor */
        unlink(f->tmp);
    forget(f);
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    f->anon = 0;
    f->tmp[0] = f->path[0] = '\0';
}

int ag_i_file_set_mode(ag_i_file_t *f, const char *target, ag_error_t *err)
{
    if (f->fd >= 0 && fchmod(f->fd, f->mode) != 0)
        return ag_fail(err, AG_EIO, "%s: cannot set its permissions: %s", target,
                       strerror(errno));
    return AG_OK;
}

int ag_i_file_place(ag_i_file_t *f, const char *target, ag_error_t *err)
{
    if (f->direct || f->fd < 0)
        return AG_OK;
    if (f->anon) {   /* a name for the unnamed file, only to rename it into place */
        if (make_name(f, f->fd) < 0)
            return ag_fail(err, AG_EIO, "%s: cannot link the finished file: %s", target,
                           errno == EMFILE && !f->slot ? "too many files being written at once"
                                                         : strerror(errno));
        f->anon = 0;     /* from here on it has a name that release() must remove */
    }
    if (rename(f->tmp, f->final) != 0)
        return ag_fail(err, AG_EIO, "%s: cannot rename into place: %s", target,
                       strerror(errno));
    release(f, 0);
    return AG_OK;
}

int ag_i_file_commit(ag_i_file_t *f, const char *target, ag_error_t *err)
{
    int rc = ag_i_file_set_mode(f, target, err);
    if (!rc)
        rc = ag_i_file_place(f, target, err);
    if (rc)
        ag_i_file_abort(f);
    return rc;
}

void ag_i_file_abort(ag_i_file_t *f)
{
    /* The target is never touched: an old file stays as it was, and a device
       or FIFO written in place cannot be taken back. */
    if (f->fd >= 0 || f->slot)
        release(f, 1);
}

void ag_i_file_name_in_message(ag_error_t *err, const char *path, const char *target)
{
    if (!path[0] || strcmp(path, target) == 0)
        return;
    /* /dev/fd/3 is not the start of /dev/fd/31 */
    const size_t len = strlen(path);
    char *at = strstr(err->msg, path);
    while (at && at[len] >= '0' && at[len] <= '9')
        at = strstr(at + 1, path);
    if (!at)
        return;
    char tail[sizeof err->msg];
    snprintf(tail, sizeof tail, "%s", at + len);
    snprintf(at, sizeof err->msg - (size_t)(at - err->msg), "%s%s", target, tail);
}
