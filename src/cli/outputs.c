/*
 * The command-line tool's outputs: whole or not at all, and never clobbering
 * what is not theirs (base/whole_file.c writes each file; its comment says
 * how), plus what only a command line has: `-` for standard output, accepted
 * extensions, two options naming one file, and the temporaries removed when a
 * signal ends the run.
 *
 * `-` is standard output; when an output goes there, the human report moves
 * to standard error so it never mixes with the data, and the data goes to a
 * temporary in $TMPDIR (or /tmp) whose bytes are copied to standard output at
 * commit: whole or not at all, appended under `>> log`, and fine on a pipe or
 * a socket.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "base/base.h"

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
        return ag_fail(err, AG_EIO, "standard output: cannot redirect the report: %s",
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

/*
 * Finds what the target names: standard output (`-`, or the same file as
 * descriptor 1), else what base/whole_file.c resolves (a file written in
 * place, or one a temporary will replace). Creates nothing.
 */
static int resolve(out_file_t *o, ag_error_t *err)
{
    struct stat st, st1;
    const int have1 = fstat(1, &st1) == 0;
    o->direct = o->is_stdout = 0;
    if (strcmp(o->target, "-") == 0) {
        if (!have1)
            return ag_fail(err, AG_EIO, "%s -: standard output is closed", o->option);
        o->is_stdout = o->direct = 1;
        o->file.have_id = 1, o->file.dev = st1.st_dev, o->file.ino = st1.st_ino;
        snprintf(o->file.final, sizeof o->file.final, "-");
        return AG_OK;
    }
    /* the same file as standard output; /dev/null there mixes nothing */
    if (have1 && stat(o->target, &st) == 0 && st.st_dev == st1.st_dev &&
        st.st_ino == st1.st_ino && !S_ISDIR(st.st_mode) && !(S_ISCHR(st.st_mode) && !isatty(1))) {
        o->is_stdout = o->direct = 1;
        o->file.have_id = 1, o->file.dev = st.st_dev, o->file.ino = st.st_ino;
        snprintf(o->file.final, sizeof o->file.final, "%s", o->target);
        return AG_OK;
    }
    int rc = ag_i_file_resolve(&o->file, o->target, o->option, err);
    o->direct = o->file.direct;
    return rc;
}

/* Creates the temporary: beside the file, or in $TMPDIR (or /tmp) for
   standard output; kept open in o->file.fd. */
static int create(out_file_t *o, ag_error_t *err)
{
    if (o->is_stdout) {
        int rc = take_stdout(err);
        if (rc)
            return rc;
        const char *dir = getenv("TMPDIR");
        if (!dir || !*dir)
            dir = "/tmp";
        memset(&o->file, 0, sizeof o->file);
        o->file.fd = -1;
        o->file.mode = 0600;   /* never placed: its bytes are copied */
        if (snprintf(o->file.tmp, sizeof o->file.tmp, "%s%sattngraph-stdout.XXXXXX", dir,
                     dir[strlen(dir) - 1] == '/' ? "" : "/") >= (int)sizeof o->file.tmp) {
            o->file.tmp[0] = '\0';
            return ag_fail(err, AG_EIO, "%s: path is too long", o->target);
        }
    }
    ag_i_file_cleanup_on_signals();
    return ag_i_file_create(&o->file, o->option, o->target, err);
}

static int same_file(const out_file_t *a, const out_file_t *b)
{
    const ag_i_file_t *x = &a->file, *y = &b->file;
    if (x->have_id && y->have_id)
        return x->dev == y->dev && x->ino == y->ino;
    return !x->have_id && !y->have_id && strcmp(x->final, y->final) == 0;
}

void out_init(out_file_t *o, const char *target, const char *option, const char *exts)
{
    memset(o, 0, sizeof *o);
    o->target = target;
    o->option = option;
    o->exts = exts;
    o->file.fd = -1;
}

int out_open_all(out_file_t *outs, int n, int *usage, ag_error_t *err)
{
    int rc = AG_OK;
    for (int k = 0; k < n && !rc; k++) {
        out_file_t *o = &outs[k];
        memset(&o->file, 0, sizeof o->file);
        o->file.fd = -1;
        if (!o->target)
            continue;
        if (!*o->target) {
            *usage = 1;
            return ag_fail(err, AG_EINVAL, "%s: the file name is empty", o->option);
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
            return ag_fail(err, AG_EINVAL, "%s %s: this output is %s%s; %s", o->option,
                           o->target, list, ext_listed("", o->exts) ? " (or no extension)" : "",
                           why);
        }
        for (int j = 0; j < k; j++)
            if (outs[j].target && same_file(&outs[j], o)) {
                *usage = 1;
                return ag_fail(err, AG_EINVAL, "%s %s and %s %s name the same file; give each "
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

/* Copies standard output's temporary to it, then removes the temporary. */
static int place_stdout(out_file_t *o, ag_error_t *err)
{
    const int rc = copy_fd(o->file.fd, stdout_fd), saved = errno;
    ag_i_file_abort(&o->file);
    if (rc != 0)
        return ag_fail(err, AG_EIO, "%s: cannot write to standard output: %s", o->option,
                       strerror(saved));
    return AG_OK;
}

int out_commit_all(out_file_t *outs, int n, ag_error_t *err)
{
    /* First what can fail while nothing is replaced yet: the modes. */
    for (int k = 0; k < n; k++) {
        out_file_t *o = &outs[k];
        int rc;
        if (o->target && !o->is_stdout && (rc = ag_i_file_set_mode(&o->file, o->target, err)))
            return rc;
    }
    /* Then the renames, and standard output last (a closed pipe fails it). */
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < n; k++) {
            out_file_t *o = &outs[k];
            if (!o->target || o->file.fd < 0 || o->is_stdout != pass)
                continue;
            const int rc = pass ? place_stdout(o, err) : ag_i_file_place(&o->file, o->target, err);
            if (rc)
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
    if (o->target)
        ag_i_file_abort(&o->file);
}

void out_name_errors(const out_file_t *outs, int n, ag_error_t *err)
{
    for (int k = 0; k < n; k++)
        if (outs[k].target)
            ag_i_file_name_in_message(err, outs[k].file.path, outs[k].target);
}

int out_write_text(out_file_t *o, const char *text, ag_error_t *err)
{
    FILE *f = fopen(o->file.path, "w");
    if (!f)
        return ag_fail(err, AG_EIO, "%s: cannot write", o->target);
    const size_t n = strlen(text);
    const int bad = fwrite(text, 1, n, f) != n;
    if (fclose(f) != 0 || bad)
        return ag_fail(err, AG_EIO, "%s: write failed", o->target);
    return AG_OK;
}

void out_say_written(const out_file_t *outs, int n)
{
    for (int k = 0; k < n; k++)
        if (outs[k].target)
            printf("wrote %s\n", outs[k].target);
}

void out_abort_all(out_file_t *outs, int n, ag_error_t *err)
{
    out_name_errors(outs, n, err);
    for (int k = 0; k < n; k++)
        out_abort(&outs[k]);
}
