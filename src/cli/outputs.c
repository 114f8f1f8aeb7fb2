#define _GNU_SOURCE   /* O_TMPFILE; realpath */
/*
 * Output files that appear whole or not at all, and never clobber what is
 * not theirs.
 *
 * A regular file (or a name not there yet) is written to a temporary beside
 * it and renamed into place when the whole run succeeded, so a reader never
 * sees half a file and a failed run leaves the old one exactly as it was. A
 * symlink is followed: the temporary goes beside the file it names and the
 * link stays a link. Anything else (a character device such as /dev/null, a
 * FIFO, a socket) is written in place: renaming over it would replace the
 * device node with a plain file. `-` is standard output; when an output goes
 * there, the human report moves to standard error so it never mixes with the
 * data, and the data goes to a temporary in $TMPDIR (or /tmp) whose bytes are
 * copied to standard output at commit: whole or not at all, appended under
 * `>> log`, and fine on a pipe or a socket.
 *
 * A temporary stays open from mkstemp to commit or abort, and writers open it
 * as /dev/fd/<fd>, the same inode: a name swapped for a symlink in a shared
 * directory in between is never followed. An existing target that is not
 * writable is refused, as a plain write would refuse it.
 *
 * Temporaries are kept in a small registry that a SIGINT/SIGTERM/SIGHUP/SIGPIPE
 * handler unlinks before the signal takes its default course (exit status
 * 130/143/129/141 in a shell); a signal the caller ignores stays ignored.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "base/base.h"

/* ---- the registry of live temporaries (read by the signal handler) ---- */

#define MAX_LIVE 64
static const char *volatile live[MAX_LIVE];
static int handlers_installed;
/* Set by the handler before it unlinks: the handler may run on another thread
   (OpenBLAS's and OpenMP's take signals too) while this one is creating a
   temporary, so a file made after the unlinks must remove itself. */
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

static void install_handlers(void)
{
    if (handlers_installed)
        return;
    handlers_installed = 1;
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

static void forget(out_file_t *o)
{
    if (o->slot > 0)
        live[o->slot - 1] = NULL;
    o->slot = 0;
}

/* ---- standard output ---- */

static int stdout_fd = -1;   /* the real standard output once fd 1 went to stderr */

/* Moves fd 1 to stderr (so every report goes there) and keeps the real
   standard output on a fresh descriptor for the data. */
static int take_stdout(ag_error_t *err)
{
    if (stdout_fd >= 0)
        return AG_OK;
    fflush(stdout);
    int fd = dup(1);
    if (fd < 0 || dup2(2, 1) < 0) {
        if (fd >= 0)
            close(fd);
        return ag_i_fail(err, AG_EIO, "standard output: cannot redirect the report: %s",
                         strerror(errno));
    }
    stdout_fd = fd;
    return AG_OK;
}

/* ---- naming ---- */

static const char *extension(const char *name)
{
    const char *dot = strrchr(name, '.'), *slash = strrchr(name, '/');
    return dot && (!slash || dot > slash) && dot[1] ? dot + 1 : "";
}

const char *out_extension(const out_file_t *o)
{
    return o->target ? extension(o->target) : "";
}

/* Is ext one of the comma-separated exts? A trailing comma accepts a name
   without an extension. */
static int ext_listed(const char *ext, const char *exts)
{
    size_t n = strlen(ext);
    if (!n)
        return *exts && exts[strlen(exts) - 1] == ',';
    for (const char *p = exts; *p;) {
        size_t len = strcspn(p, ",");
        if (n && len == n && strncasecmp(p, ext, n) == 0)
            return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

/* "dir" + "/" + "base" into out (cap 4096). */
static int join(char *out, const char *dir, const char *base)
{
    int n = snprintf(out, 4096, "%s%s%s", dir, *dir && dir[strlen(dir) - 1] == '/' ? "" : "/",
                     base);
    return n >= 4096;
}

/*
 * Finds what the target names: standard output, a non-regular file written in
 * place, or the regular file (existing or not, symlinks followed) that a
 * temporary will replace. Creates nothing.
 */
static int resolve(out_file_t *o, ag_error_t *err)
{
    struct stat st, st1;
    const int have1 = fstat(1, &st1) == 0;
    o->have_id = 0;
    o->direct = o->is_stdout = 0;
    if (strcmp(o->target, "-") == 0) {
        if (!have1)
            return ag_i_fail(err, AG_EIO, "%s -: standard output is closed", o->option);
        o->is_stdout = o->direct = 1;
        o->have_id = 1, o->dev = st1.st_dev, o->ino = st1.st_ino;
        snprintf(o->final, sizeof o->final, "-");
        return AG_OK;
    }
    if (stat(o->target, &st) == 0) {
        o->have_id = 1, o->dev = st.st_dev, o->ino = st.st_ino;
        if (S_ISDIR(st.st_mode))
            return ag_i_fail(err, AG_EIO, "%s: is a directory; give a file name", o->target);
        /* the same file as standard output; /dev/null there mixes nothing */
        o->is_stdout = have1 && st.st_dev == st1.st_dev && st.st_ino == st1.st_ino &&
                       !(S_ISCHR(st.st_mode) && !isatty(1));
        if (o->is_stdout || !S_ISREG(st.st_mode)) {
            o->direct = 1;
            snprintf(o->final, sizeof o->final, "%s", o->target);
            return AG_OK;
        }
        /* rename ignores the file's mode: refuse what a plain write would */
        if (access(o->target, W_OK) != 0)
            return ag_i_fail(err, AG_EIO, "%s: cannot write: %s", o->target, strerror(errno));
        char real[PATH_MAX];
        if (!realpath(o->target, real))
            return ag_i_fail(err, AG_EIO, "%s: %s", o->target, strerror(errno));
        snprintf(o->final, sizeof o->final, "%s", real);
        o->mode = st.st_mode & 07777;
        return AG_OK;
    }
    if (errno != ENOENT)
        return ag_i_fail(err, AG_EIO, "%s: %s", o->target, strerror(errno));
    /* Not there: a new name, or a symlink to a file not yet there. */
    char cur[4096], link[4096], next[4096];
    snprintf(cur, sizeof cur, "%s", o->target);
    for (int hops = 0;; hops++) {
        struct stat ls;
        if (lstat(cur, &ls) != 0 || !S_ISLNK(ls.st_mode))
            break;
        ssize_t n = readlink(cur, link, sizeof link - 1);
        if (hops == 40 || n < 0)
            return ag_i_fail(err, AG_EIO, "%s: %s", o->target,
                             strerror(hops == 40 ? ELOOP : errno));
        link[n] = '\0';
        char *slash = strrchr(cur, '/');
        if (link[0] == '/' || !slash) {
            snprintf(next, sizeof next, "%s", link);
        } else {
            slash[1] = '\0';
            if (join(next, cur, link))
                return ag_i_fail(err, AG_EIO, "%s: path is too long", o->target);
        }
        memcpy(cur, next, sizeof cur);
    }
    char dir[4096], real[PATH_MAX];
    const char *slash = strrchr(cur, '/'), *base = slash ? slash + 1 : cur;
    if (!*base)
        return ag_i_fail(err, AG_EIO, "%s: is a directory; give a file name", o->target);
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - cur) + 1 : 1, slash ? cur : ".");
    if (!realpath(dir, real))
        return ag_i_fail(err, AG_EIO, "%s %s: cannot create: %s", o->option, o->target,
                         strerror(errno));
    if (join(o->final, real, base))
        return ag_i_fail(err, AG_EIO, "%s: path is too long", o->target);
    mode_t mask = umask(0);
    umask(mask);
    o->mode = 0666 & ~mask;   /* what a plain fopen would give */
    return AG_OK;
}

/* Registers o->tmp in slot, then makes it: with mkstemp, or (fd >= 0 given)
   by linking the unnamed file fd under a fresh name from the template. Returns
   the descriptor (mkstemp's, or fd), or -1 with errno. */
static int name_temporary(out_file_t *o, int slot, int fd)
{
    live[slot - 1] = o->tmp;
    o->slot = slot;
    int made;
    if (fd < 0) {
        made = fd = mkstemp(o->tmp);
    } else {
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        const size_t x = strlen(o->tmp) - 6;   /* the template's XXXXXX */
        static const char abc[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        unsigned long r = (unsigned long)getpid() * 2654435761u ^ (unsigned long)time(NULL);
        made = -1;
        for (int tries = 0; tries < 100 && made < 0; tries++) {
            for (size_t k = 0; k < 6; k++, r = r * 6364136223846793005u + 1442695040888963407u)
                o->tmp[x + k] = abc[(r >> 33) % (sizeof abc - 1)];
            made = linkat(AT_FDCWD, proc, AT_FDCWD, o->tmp, AT_SYMLINK_FOLLOW);
            if (made < 0 && errno != EEXIST)
                break;
        }
    }
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (dying) {                /* the handler may have unlinked before the name existed */
        if (made >= 0)
            unlink(o->tmp);
        for (;;)
            pause();            /* the handler is ending the process */
    }
    if (made < 0) {
        const int e = errno;
        forget(o);
        errno = e;
        return -1;
    }
    return fd;
}

static int register_and_make(out_file_t *o, int slot)
{
    return name_temporary(o, slot, -1);
}

/* Creates the temporary, beside o->final (so the rename stays on one disk),
   or in $TMPDIR (or /tmp) for standard output; keeps it open in o->fd. */
static int create(out_file_t *o, ag_error_t *err)
{
    if (o->direct && !o->is_stdout) {
        snprintf(o->path, sizeof o->path, "%s", o->final);
        return AG_OK;
    }
    int n;
    if (o->is_stdout) {
        int rc = take_stdout(err);
        if (rc)
            return rc;
        const char *dir = getenv("TMPDIR");
        if (!dir || !*dir)
            dir = "/tmp";
        n = snprintf(o->tmp, sizeof o->tmp, "%s%sattngraph-stdout.XXXXXX", dir,
                     dir[strlen(dir) - 1] == '/' ? "" : "/");
    } else {
        const char *slash = strrchr(o->final, '/');   /* final is absolute */
        n = snprintf(o->tmp, sizeof o->tmp, "%.*s.%s.XXXXXX", (int)(slash - o->final + 1),
                     o->final, slash + 1);
    }
    if (n >= (int)sizeof o->tmp) {
        o->tmp[0] = '\0';
        return ag_i_fail(err, AG_EIO, "%s: path is too long", o->target);
    }
    int slot = 0;
    for (int i = 0; i < MAX_LIVE && !slot; i++)
        if (!live[i])
            slot = i + 1;
    if (!slot) {
        o->tmp[0] = '\0';
        return ag_i_fail(err, AG_ELIMIT, "%s: too many outputs at once", o->target);
    }
    install_handlers();
#ifdef O_TMPFILE
    /* An unnamed file in the target's directory: it vanishes with the process,
       whatever ends it; place() gives it a name only to rename it into place. */
    const char *slash = strrchr(o->tmp, '/');
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - o->tmp) + 1 : 1, slash ? o->tmp : ".");
    const int anon = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (anon >= 0) {
        o->anon = 1;
        o->fd = anon;
        snprintf(o->path, sizeof o->path, "/dev/fd/%d", anon);
        return AG_OK;
    }
#endif
    /* No O_TMPFILE here (some file systems): a named temporary, registered
       before it exists (unlinking a name not yet created is harmless); blocking
       the signals would not do, as other threads may take them. */
    int fd = register_and_make(o, slot);
    if (fd < 0) {
        o->tmp[0] = '\0';
        return ag_i_fail(err, AG_EIO, "%s %s: cannot create: %s", o->option, o->target,
                         strerror(errno));
    }
    o->fd = fd;
    snprintf(o->path, sizeof o->path, "/dev/fd/%d", fd);
    return AG_OK;
}

static int same_file(const out_file_t *a, const out_file_t *b)
{
    if (a->have_id && b->have_id)
        return a->dev == b->dev && a->ino == b->ino;
    return !a->have_id && !b->have_id && strcmp(a->final, b->final) == 0;
}

void out_init(out_file_t *o, const char *target, const char *option, const char *exts)
{
    memset(o, 0, sizeof *o);
    o->target = target;
    o->option = option;
    o->exts = exts;
    o->fd = -1;
}

int out_open_all(out_file_t *outs, int n, int *usage, ag_error_t *err)
{
    int rc = AG_OK;
    for (int k = 0; k < n && !rc; k++) {
        out_file_t *o = &outs[k];
        o->path[0] = o->tmp[0] = '\0';
        o->slot = 0;
        o->fd = -1;
        if (!o->target)
            continue;
        if (!*o->target) {
            *usage = 1;
            return ag_i_fail(err, AG_EINVAL, "%s: the file name is empty", o->option);
        }
        if ((rc = resolve(o, err)))
            return rc;
        if (o->exts && !o->direct && !ext_listed(extension(o->target), o->exts)) {
            *usage = 1;
            char list[256] = "";
            for (const char *p = o->exts; *p;) {
                size_t len = strcspn(p, ",");
                const int last = !p[len] || !p[len + 1];
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s.%.*s",
                         *list ? (last ? " or " : ", ") : "", (int)len, p);
                p += len + (p[len] == ',');
            }
            const char *ext = extension(o->target);
            char why[sizeof list + 96] = "the name has no extension";
            if (*ext && strchr(list, ' '))
                snprintf(why, sizeof why, ".%.60s is none of them", ext);
            else if (*ext)
                snprintf(why, sizeof why, ".%.60s is not %s", ext, list);
            return ag_i_fail(err, AG_EINVAL, "%s %s: this output is %s%s; %s", o->option,
                             o->target, list, ext_listed("", o->exts) ? " (or no extension)" : "",
                             why);
        }
        for (int j = 0; j < k; j++)
            if (outs[j].target && same_file(&outs[j], o)) {
                *usage = 1;
                return ag_i_fail(err, AG_EINVAL, "%s %s and %s %s name the same file; give each "
                                 "output its own", outs[j].option, outs[j].target, o->option,
                                 o->target);
            }
    }
    for (int k = 0; k < n && !rc; k++)
        if (outs[k].target)
            rc = create(&outs[k], err);
    if (rc)
        for (int k = 0; k < n; k++)
            out_abort(&outs[k]);
    return rc;
}

int out_open(out_file_t *o, const char *target, const char *option, const char *exts,
             ag_error_t *err)
{
    int usage = 0;
    out_init(o, target, option, exts);
    return out_open_all(o, 1, &usage, err);
}

/* Copies the whole of file from to descriptor to (partial writes and EINTR
   handled); returns 0 or -1 with errno set. */
static int copy_fd(int from, int to)
{
    char buf[1 << 16];
    for (off_t off = 0;;) {
        ssize_t n = pread(from, buf, sizeof buf, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return (int)n;
        off += n;
        for (ssize_t done = 0; done < n;) {
            ssize_t w = write(to, buf + done, (size_t)(n - done));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                return -1;
            done += w;
        }
    }
}

/* Closes and forgets the temporary, removing it first when `remove`. */
static void release(out_file_t *o, int remove)
{
    if (remove && !o->anon)   /* an unnamed temporary goes with its descriptor */
        unlink(o->tmp);
    forget(o);
    if (o->fd >= 0)
        close(o->fd);
    o->fd = -1;
    o->anon = 0;
    o->tmp[0] = o->path[0] = '\0';
}

/* Renames o's temporary onto its file, or copies it to standard output. */
static int place(out_file_t *o, ag_error_t *err)
{
    if (o->is_stdout) {
        int rc = copy_fd(o->fd, stdout_fd);
        int saved = errno;
        release(o, 1);
        if (rc != 0)
            return ag_i_fail(err, AG_EIO, "%s: cannot write to standard output: %s", o->option,
                             strerror(saved));
        return AG_OK;
    }
    if (o->anon) {   /* a name for the unnamed file, only to rename it into place */
        int slot = 0;
        for (int i = 0; i < MAX_LIVE && !slot; i++)
            if (!live[i])
                slot = i + 1;
        if (!slot || name_temporary(o, slot, o->fd) < 0)
            return ag_i_fail(err, AG_EIO, "%s: cannot link the finished file: %s", o->target,
                             slot ? strerror(errno) : "too many outputs at once");
        o->anon = 0;     /* from here on it has a name that release() must remove */
    }
    if (rename(o->tmp, o->final) != 0)
        return ag_i_fail(err, AG_EIO, "%s: cannot rename into place: %s", o->target,
                         strerror(errno));
    release(o, 0);
    return AG_OK;
}

int out_commit_all(out_file_t *outs, int n, ag_error_t *err)
{
    /* First what can fail while nothing is replaced yet: the modes. mkstemp
       made 0600; the mode is set only now, so that a mode without the owner's
       write bit does not stop the writers reopening the temporary. */
    for (int k = 0; k < n; k++) {
        out_file_t *o = &outs[k];
        if (o->target && o->tmp[0] && !o->is_stdout && fchmod(o->fd, o->mode) != 0)
            return ag_i_fail(err, AG_EIO, "%s: cannot set its permissions: %s", o->target,
                             strerror(errno));
    }
    /* Then the renames, and standard output last (a closed pipe fails it). */
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < n; k++) {
            out_file_t *o = &outs[k];
            int rc;
            if (o->target && o->tmp[0] && o->is_stdout == pass && (rc = place(o, err)))
                return rc;
        }
    return AG_OK;
}

int out_commit(out_file_t *o, ag_error_t *err)
{
    return out_commit_all(o, 1, err);
}

void out_abort(out_file_t *o)
{
    /* The target is never touched: an old file stays as it was, and a device
       or FIFO written in place cannot be taken back. */
    if (!o->target || !o->tmp[0])
        return;
    release(o, 1);
}

void out_name_errors(const out_file_t *outs, int n, ag_error_t *err)
{
    for (int k = 0; k < n; k++) {
        const out_file_t *o = &outs[k];
        if (!o->target || !o->path[0] || strcmp(o->path, o->target) == 0)
            continue;
        /* /dev/fd/3 is not the start of /dev/fd/31 */
        const size_t len = strlen(o->path);
        char *at = strstr(err->msg, o->path);
        while (at && at[len] >= '0' && at[len] <= '9')
            at = strstr(at + 1, o->path);
        if (!at)
            continue;
        char tail[sizeof err->msg];
        snprintf(tail, sizeof tail, "%s", at + strlen(o->path));
        snprintf(at, sizeof err->msg - (size_t)(at - err->msg), "%s%s", o->target, tail);
    }
}
