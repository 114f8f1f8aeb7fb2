#define _XOPEN_SOURCE 700   /* mknod */
/*
 * Where outputs go: FIFOs, devices and standard output are written in place,
 * symlinks are followed, a failed or interrupted run leaves every existing
 * file as it was and no temporaries, and outputs that clash or whose name
 * says another format are refused before any work. Everything happens in the
 * run's scratch folder, never in the real /dev.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define GRAPH "graphs/random10.edges"

/* A fresh folder in the scratch folder (the name stays valid for the test). */
static const char *fresh_dir(const char *name)
{
    static char dir[600];
    snprintf(dir, sizeof dir, "%s", tmp_path(name));
    ck_assert_msg(mkdir(dir, 0755) == 0 || errno == EEXIST, "mkdir %s", dir);
    return dir;
}

static const char *in_dir(const char *dir, const char *name)
{
    static char buf[8][1024];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", dir, name);
    return p;
}

/* A whole file (binary) into *data; returns its size, -1 if it cannot be read. */
static long read_bytes(const char *path, char **data)
{
    FILE *f = fopen(path, "rb");
    *data = NULL;
    if (!f)
        return -1;
    long n = 0, cap = 1 << 16;
    char *buf = malloc((size_t)cap);
    size_t got;
    while ((got = fread(buf + n, 1, (size_t)(cap - n), f)) > 0)
        if ((n += (long)got) == cap)
            buf = realloc(buf, (size_t)(cap *= 2));
    fclose(f);
    *data = buf;
    return n;
}

/* Entries of dir, "." and ".." aside; names starting with `prefix` counted in *hidden. */
static int count_entries(const char *dir, const char *prefix, int *hidden)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    if (hidden)
        *hidden = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        n++;
        if (hidden && prefix && strncmp(e->d_name, prefix, strlen(prefix)) == 0)
            (*hidden)++;
    }
    closedir(d);
    return n;
}

/* The bytes `run GRAPH --out FILE.npy --quiet` writes to a regular file. */
static long expected_npy(const char *dir, char **data)
{
    char args[1024];
    const char *ref = in_dir(dir, "reference.npy");
    snprintf(args, sizeof args, "run " GRAPH " --out %s --quiet", ref);
    expect_cli(args, 0, 1, "");
    long n = read_bytes(ref, data);
    ck_assert_int_gt(n, 10);
    ck_assert(memcmp(*data, "\x93NUMPY", 6) == 0);
    unlink(ref);
    return n;
}

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* A child that copies what comes through the FIFO to the file `to`; exits 0
   when the writer closed it. */
static pid_t fifo_reader(const char *fifo, const char *to)
{
    pid_t reader = fork();
    ck_assert_int_ge(reader, 0);
    if (reader == 0) {
        int in = open(fifo, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        char buf[4096];
        ssize_t n;
        while (in >= 0 && (n = read(in, buf, sizeof buf)) > 0)
            if (write(out, buf, (size_t)n) != n)
                _exit(2);
        _exit(in >= 0 ? 0 : 1);
    }
    return reader;
}

START_TEST(fifo_is_written_not_replaced)
{
    const char *dir = fresh_dir("out-fifo");
    char *want;
    const long n_want = expected_npy(dir, &want);
    const char *fifo = in_dir(dir, "pipe.npy"), *got_path = in_dir(dir, "got.bin");
    ck_assert_int_eq(mkfifo(fifo, 0644), 0);

    const pid_t reader = fifo_reader(fifo, got_path);   /* copies the FIFO to got.bin */
    char args[1024];
    snprintf(args, sizeof args, "run " GRAPH " --out %s --quiet", fifo);
    int rc = run_cli(args, NULL, NULL);
    int status = 0, done = 0;
    for (int k = 0; k < 100 && !(done = waitpid(reader, &status, WNOHANG) == reader); k++)
        sleep_ms(10);
    if (!done) {                /* the old code renamed a file over the FIFO */
        kill(reader, SIGKILL);
        waitpid(reader, &status, 0);
    }
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(done, "the FIFO's reader got no end of data");
    struct stat st;
    ck_assert_int_eq(lstat(fifo, &st), 0);
    ck_assert_msg(S_ISFIFO(st.st_mode), "the FIFO was replaced");
    char *got;
    const long n_got = read_bytes(got_path, &got);
    ck_assert_int_eq(n_got, n_want);
    ck_assert(memcmp(got, "\x93NUMPY", 6) == 0);
    ck_assert(memcmp(got, want, (size_t)n_want) == 0);
    free(got), free(want);
}
END_TEST

/* A FIFO's name is a hint, not a rule: --attn to a FIFO named x.txt is CSV,
   refused neither before nor after the work. */
START_TEST(direct_attn_falls_back_to_csv)
{
    const char *dir = fresh_dir("out-fifo-txt");
    const char *fifo = in_dir(dir, "attn.txt"), *got_path = in_dir(dir, "got.csv");
    ck_assert_int_eq(mkfifo(fifo, 0644), 0);
    const pid_t reader = fifo_reader(fifo, got_path);
    char args[1024];
    snprintf(args, sizeof args, "run " GRAPH " --attn %s --quiet", fifo);
    char *out, *err;
    int rc = run_cli(args, &out, &err);
    int status = 0, done = 0;
    for (int k = 0; k < 100 && !(done = waitpid(reader, &status, WNOHANG) == reader); k++)
        sleep_ms(10);
    if (!done) {                /* the old code never opened the FIFO */
        kill(reader, SIGKILL);
        waitpid(reader, &status, 0);
    }
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    ck_assert(done);
    char *text = read_text(got_path);
    ck_assert_msg(strncmp(text, "src,dst,", 8) == 0, "got: %.40s", text);
    free(text), free(out), free(err);
}
END_TEST

START_TEST(char_device_is_written_not_replaced)
{
    const char *dir = fresh_dir("out-dev");
    const char *dev = in_dir(dir, "null");
    if (mknod(dev, S_IFCHR | 0666, makedev(1, 3)) != 0) {
        fprintf(stderr, "char_device_is_written_not_replaced: mknod: %s (skipped)\n",
                strerror(errno));
        return;
    }
    char args[1024];
    snprintf(args, sizeof args, "run " GRAPH " --out %s --quiet", dev);
    expect_cli(args, 0, 1, "");
    struct stat st;
    ck_assert_int_eq(lstat(dev, &st), 0);
    ck_assert_msg(S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3),
                  "the device node was replaced");
    ck_assert_int_eq(count_entries(dir, ".", NULL), 1);   /* no temporaries */

    /* a failed run does not remove it either */
    snprintf(args, sizeof args, "run " GRAPH " --out %s --features %s", dev,
             in_dir(dir, "nosuch.npy"));
    expect_cli(args, 1, 2, "nosuch.npy");
    ck_assert_int_eq(lstat(dev, &st), 0);
    ck_assert(S_ISCHR(st.st_mode));

    /* every writer: --attn (CSV without an extension), --trace, pattern */
    snprintf(args, sizeof args, "run " GRAPH " --rounds 2 --attn %s --quiet", dev);
    expect_cli(args, 0, 1, "");
    snprintf(args, sizeof args, "pattern causal --nodes 4 --out %s --quiet", dev);
    expect_cli(args, 0, 1, "");
    ck_assert_int_eq(lstat(dev, &st), 0);
    ck_assert(S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3));
    ck_assert_int_eq(count_entries(dir, ".", NULL), 1);
}
END_TEST

START_TEST(symlink_is_followed)
{
    const char *dir = fresh_dir("out-link");
    char *want;
    const long n_want = expected_npy(dir, &want);
    const char *real = in_dir(dir, "real.npy"), *link = in_dir(dir, "link.npy");
    write_text(real, "old");
    ck_assert_int_eq(symlink("real.npy", link), 0);
    char args[1024];
    snprintf(args, sizeof args, "run " GRAPH " --out %s --quiet", link);
    expect_cli(args, 0, 1, "");
    struct stat st;
    ck_assert_int_eq(lstat(link, &st), 0);
    ck_assert_msg(S_ISLNK(st.st_mode), "the link was replaced");
    char *got;
    ck_assert_int_eq(read_bytes(real, &got), n_want);
    ck_assert(memcmp(got, want, (size_t)n_want) == 0);
    free(got);

    /* a link to a file not there yet creates that file */
    char sub[700];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    const char *dangling = in_dir(dir, "dangling.npy");
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    ck_assert_int_eq(symlink("sub/new.npy", dangling), 0);
    snprintf(args, sizeof args, "run " GRAPH " --out %s --quiet", dangling);
    expect_cli(args, 0, 1, "");
    ck_assert_int_eq(lstat(dangling, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert_int_eq(read_bytes(in_dir(sub, "new.npy"), &got), n_want);
    free(got);

    /* a failed run leaves both the link and its file */
    snprintf(args, sizeof args, "run " GRAPH " --out %s --features %s", link,
             in_dir(dir, "nosuch.npy"));
    expect_cli(args, 1, 2, "nosuch.npy");
    ck_assert_int_eq(lstat(link, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert_int_eq(read_bytes(real, &got), n_want);
    ck_assert(memcmp(got, want, (size_t)n_want) == 0);
    free(got), free(want);
    int hidden;
    ck_assert_int_eq(count_entries(dir, ".", &hidden), 4);   /* real, link, sub, dangling */
    ck_assert_int_eq(hidden, 0);
}
END_TEST

START_TEST(dash_is_standard_output)
{
    const char *dir = fresh_dir("out-dash");
    char *want;
    const long n_want = expected_npy(dir, &want);
    /* stdout holds exactly the .npy; the report went to stderr */
    char *out, *err;
    ck_assert_int_eq(run_cli("run " GRAPH " --out -", &out, &err), 0);
    free(out);
    char *got;
    ck_assert_int_eq(read_bytes(tmp_path("cli.stdout"), &got), n_want);
    ck_assert(memcmp(got, want, (size_t)n_want) == 0);
    free(got);
    ck_assert_ptr_nonnull(strstr(err, "attends"));
    ck_assert_ptr_nonnull(strstr(err, "wrote -"));
    free(err);

    /* a name for the same file as stdout counts as stdout (here a link in the
       scratch folder to /proc/self/fd/1, not the system's /dev/stdout) */
    const char *alias = in_dir(dir, "stdout");
    ck_assert_int_eq(symlink("/proc/self/fd/1", alias), 0);
    char args[1024];
    snprintf(args, sizeof args, "run " GRAPH " --out %s", alias);
    ck_assert_int_eq(run_cli(args, &out, &err), 0);
    free(out);
    ck_assert_int_eq(read_bytes(tmp_path("cli.stdout"), &got), n_want);
    ck_assert(memcmp(got, want, (size_t)n_want) == 0);
    free(got), free(err);
    struct stat st;
    ck_assert_int_eq(lstat(alias, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));

    /* a graph file to stdout, with its report on stderr */
    ck_assert_int_eq(run_cli("pattern causal --nodes 3 --out - --format gml", &out, &err), 0);
    ck_assert_msg(strncmp(out, "Creator", 7) == 0, "stdout: %s", out);
    ck_assert_ptr_nonnull(strstr(err, "-> - (gml)"));
    free(out), free(err);
    /* a CSV to stdout */
    ck_assert_int_eq(run_cli("run " GRAPH " --attn - --quiet", &out, &err), 0);
    ck_assert_msg(strncmp(out, "src,dst,", 8) == 0, "stdout: %s", out);
    free(out), free(err);
    /* "-" twice is the same file */
    expect_cli("run " GRAPH " --out - --messages -", 2, 2, "name the same file");
    free(want);
}
END_TEST

START_TEST(failed_run_keeps_the_old_file)
{
    const char *dir = fresh_dir("out-fail");
    const char *precious = in_dir(dir, "precious.npy"), *csv = in_dir(dir, "attn.csv");
    char args[1024];
    snprintf(args, sizeof args, "run " GRAPH " --out %s --attn %s --quiet", precious, csv);
    expect_cli(args, 0, 1, "");
    char *before, *before_csv, *after;
    const long n = read_bytes(precious, &before), n_csv = read_bytes(csv, &before_csv);
    ck_assert_int_gt(n, 0);
    snprintf(args, sizeof args, "run " GRAPH " --out %s --attn %s --features %s",
             precious, csv, in_dir(dir, "nosuch.npy"));
    expect_cli(args, 1, 2, "nosuch.npy");
    ck_assert_int_eq(read_bytes(precious, &after), n);
    ck_assert(memcmp(before, after, (size_t)n) == 0);
    free(after);
    ck_assert_int_eq(read_bytes(csv, &after), n_csv);
    ck_assert(memcmp(before_csv, after, (size_t)n_csv) == 0);
    free(after), free(before), free(before_csv);
    int hidden;
    ck_assert_int_eq(count_entries(dir, ".", &hidden), 2);
    ck_assert_int_eq(hidden, 0);
}
END_TEST

/* A run that fails after --out was written (the --attn export is over
   --max-edges) leaves the old --out file byte for byte, and no temporaries. */
START_TEST(failure_after_writing_keeps_old_files)
{
    const char *dir = fresh_dir("out-fail-late");
    const char *precious = in_dir(dir, "precious.npy"), *csv = in_dir(dir, "attn.csv");
    const char *msgs = in_dir(dir, "m.npy");
    write_text(precious, "old bytes");
    write_text(msgs, "old messages");
    char args[2048];
    snprintf(args, sizeof args, "run " GRAPH " --out %s --messages %s --attn %s --max-edges 1",
             precious, msgs, csv);
    expect_cli(args, 1, 2, "more than --max-edges 1");
    char *text = read_text(precious);
    ck_assert_str_eq(text, "old bytes");
    free(text);
    text = read_text(msgs);
    ck_assert_str_eq(text, "old messages");
    free(text);
    ck_assert(!file_exists(csv));
    int hidden;
    ck_assert_int_eq(count_entries(dir, ".", &hidden), 2);
    ck_assert_int_eq(hidden, 0);
    /* the help says what --save-rounds files and the final renames do */
    expect_cli("run --help", 0, 1, "written whole as its round ends (kept if the run fails");
    expect_cli("run --help", 0, 1, "may have replaced some only");
}
END_TEST

START_TEST(two_outputs_one_file_refused)
{
    const char *dir = fresh_dir("out-same");
    const char *x = in_dir(dir, "x.npy"), *nosuch = in_dir(dir, "nosuch.npy");
    char args[2048];
    /* refused before any work: the missing features are never looked at */
    snprintf(args, sizeof args, "run " GRAPH " --out %s --messages %s --features %s", x, x,
             nosuch);
    expect_cli(args, 2, 2, "name the same file");
    snprintf(args, sizeof args, "run " GRAPH " --out %s --head-messages %s/../out-same/x.npy",
             x, dir);
    expect_cli(args, 2, 2, "name the same file");
    ck_assert(!file_exists(x));
    /* through a link to an existing file */
    write_text(x, "old");
    const char *link = in_dir(dir, "alias.npy");
    ck_assert_int_eq(symlink("x.npy", link), 0);
    snprintf(args, sizeof args, "run " GRAPH " --messages %s --out %s", x, link);
    expect_cli(args, 2, 2, "name the same file");
    char *text = read_text(x);
    ck_assert_str_eq(text, "old");
    free(text);
    /* compare's two CSVs */
    const char *c = in_dir(dir, "c.csv");
    snprintf(args, sizeof args, "compare --pattern causal --pattern complete --nodes 4 "
             "--csv %s --per-node %s", c, c);
    expect_cli(args, 2, 2, "name the same file");
    int hidden;
    ck_assert_int_eq(count_entries(dir, ".", &hidden), 2);   /* x.npy, alias.npy */
    ck_assert_int_eq(hidden, 0);
}
END_TEST

START_TEST(extension_must_match)
{
    const char *dir = fresh_dir("out-ext");
    char args[1024];
    snprintf(args, sizeof args, "run " GRAPH " --out %s", in_dir(dir, "x.csv"));
    expect_cli(args, 2, 2, "--out");
    snprintf(args, sizeof args, "run " GRAPH " --messages %s", in_dir(dir, "m"));
    expect_cli(args, 2, 2, ".npy");
    snprintf(args, sizeof args, "run " GRAPH " --attn %s", in_dir(dir, "a.txt"));
    expect_cli(args, 2, 2, ".csv, .npy or .graphml");
    snprintf(args, sizeof args, "run " GRAPH " --rounds 2 --trace %s", in_dir(dir, "t.npy"));
    expect_cli(args, 2, 2, ".csv");
    snprintf(args, sizeof args, "compare --pattern causal --pattern complete --nodes 4 --csv %s",
             in_dir(dir, "c.npy"));
    expect_cli(args, 2, 2, ".csv");
    snprintf(args, sizeof args, "pattern causal --nodes 4 --out %s", in_dir(dir, "p.npy"));
    expect_cli(args, 2, 2, ".gml, .net, .pajek, .ncol, .lgl, .edges, .el, .txt, .edgelist, "
               ".dot or .gv (or no extension); .npy is none of them");
    snprintf(args, sizeof args, "pattern causal --nodes 4 --out %s --format pajek",
             in_dir(dir, "p.gml"));
    expect_cli(args, 2, 2, "--format says pajek");
    ck_assert_int_eq(count_entries(dir, ".", NULL), 0);   /* nothing was written */
    /* agreeing names still work */
    snprintf(args, sizeof args, "pattern causal --nodes 4 --out %s --format gml --quiet",
             in_dir(dir, "p.gml"));
    expect_cli(args, 0, 1, "");
    snprintf(args, sizeof args, "run " GRAPH " --out %s --attn %s --quiet", in_dir(dir, "X.NPY"),
             in_dir(dir, "a.graphml"));
    expect_cli(args, 0, 1, "");
    ck_assert_int_eq(count_entries(dir, ".", NULL), 3);
}
END_TEST

/* `sh -c cmd`, as an unprivileged user when the tests run as root (so that
   permissions mean what they say); returns the exit status. */
static int run_shell(const char *cmd, int unprivileged)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (unprivileged && geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
            _exit(126);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

START_TEST(standard_output_appends)
{
    const char *dir = fresh_dir("out-append");
    char *want, *got, cmd[2048];
    const long n_want = expected_npy(dir, &want);
    const char *log = in_dir(dir, "log");
    /* `>> log` keeps what was there: the old code reopened /dev/fd/1 with O_TRUNC */
    write_text(log, "KEEP\n");
    snprintf(cmd, sizeof cmd, AG_CLI_PATH " run " GRAPH " --out - >>'%s' 2>/dev/null", log);
    ck_assert_int_eq(run_shell(cmd, 0), 0);
    ck_assert_int_eq(read_bytes(log, &got), 5 + n_want);
    ck_assert(memcmp(got, "KEEP\n", 5) == 0);
    ck_assert(memcmp(got + 5, want, (size_t)n_want) == 0);
    free(got);
    /* --attn - too, twice in a row */
    write_text(log, "KEEP\n");
    snprintf(cmd, sizeof cmd, "for k in 1 2; do " AG_CLI_PATH " run " GRAPH " --attn - --quiet "
             ">>'%s' || exit 1; done", log);
    ck_assert_int_eq(run_shell(cmd, 0), 0);
    char *text = read_text(log);
    ck_assert_msg(strncmp(text, "KEEP\nsrc,dst,", 13) == 0, "log: %.40s", text);
    const char *second = strstr(text + 13, "src,dst,");
    ck_assert_ptr_nonnull(second);
    ck_assert_ptr_null(strstr(second + 1, "src,dst,"));
    free(text);
    /* a pipe: all of it comes through */
    const char *piped = in_dir(dir, "piped.npy");
    snprintf(cmd, sizeof cmd, AG_CLI_PATH " run " GRAPH " --out - --quiet | cat >'%s'", piped);
    ck_assert_int_eq(run_shell(cmd, 0), 0);
    ck_assert_int_eq(read_bytes(piped, &got), n_want);
    ck_assert(memcmp(got, want, (size_t)n_want) == 0);
    free(got), free(want);
}
END_TEST

START_TEST(read_only_target_refused)
{
    const char *dir = fresh_dir("out-readonly");
    extern char test_scratch_dir[];
    /* the unprivileged user must reach the directory, not the files in it */
    ck_assert_int_eq(chmod(test_scratch_dir, 0711), 0);
    ck_assert_int_eq(chmod(dir, 0777), 0);
    const char *ro = in_dir(dir, "ro.npy");
    write_text(ro, "old");
    ck_assert_int_eq(chmod(ro, 0444), 0);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, AG_CLI_PATH " run " GRAPH " --out '%s' --quiet 2>'%s'", ro,
             in_dir(dir, "err"));
    const int rc = run_shell(cmd, 1);
    /* the same user can write a new file there: only the mode refused it */
    snprintf(cmd, sizeof cmd, AG_CLI_PATH " run " GRAPH " --out '%s' --quiet",
             in_dir(dir, "new.npy"));
    const int rc_new = run_shell(cmd, 1);
    ck_assert_int_eq(chmod(test_scratch_dir, 0700), 0);
    ck_assert_int_eq(rc_new, 0);
    ck_assert_int_eq(rc, 1);
    char *err = read_text(in_dir(dir, "err")), *text = read_text(ro);
    ck_assert_msg(strstr(err, "ro.npy: cannot write: Permission denied"), "stderr: %s", err);
    ck_assert_str_eq(text, "old");
    struct stat st;
    ck_assert_int_eq(stat(ro, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0444);
    free(err), free(text);
    int hidden;
    ck_assert_int_eq(count_entries(dir, ".", &hidden), 3);   /* ro.npy, err, new.npy */
    ck_assert_int_eq(hidden, 0);
}
END_TEST

/* A reader that closes the pipe early ends the run with SIGPIPE while it prints
   its report: the outputs are committed before, so they are there. */
START_TEST(early_reader_keeps_outputs)
{
    const char *dir = fresh_dir("out-head");
    const char *x = in_dir(dir, "x.npy"), *t = in_dir(dir, "t.csv");
    char cmd[2048];
    /* 3000 trace lines: far more than a pipe holds (no residual: the states stay
       bounded over 3000 rounds, where residual ones overflow float32) */
    snprintf(cmd, sizeof cmd, AG_CLI_PATH " run " GRAPH " --rounds 3000 --no-residual --out '%s' "
             "--trace '%s' | head -c1 >/dev/null", x, t);
    ck_assert_int_eq(run_shell(cmd, 0), 0);
    char *data;
    ck_assert_int_gt(read_bytes(x, &data), 10);
    ck_assert(memcmp(data, "\x93NUMPY", 6) == 0);
    free(data);
    ck_assert(file_exists(t));
    int hidden;
    ck_assert_int_eq(count_entries(dir, ".", &hidden), 2);
    ck_assert_int_eq(hidden, 0);
}
END_TEST

/* run_cli with standard input from a file. */
static int run_cli_stdin(const char *args, const char *input, char **err)
{
    char cmd[4096];
    const char *e = tmp_path("cli.stderr");
    snprintf(cmd, sizeof cmd, AG_CLI_PATH " %s >/dev/null 2>'%s' <'%s'", args, e, input);
    int status = system(cmd);
    if (err)
        *err = read_text(e);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Are the two files byte for byte the same? */
static int same_bytes(const char *a, const char *b)
{
    char *x, *y;
    long n = read_bytes(a, &x), m = read_bytes(b, &y);
    int same = n > 0 && n == m && memcmp(x, y, (size_t)n) == 0;
    free(x), free(y);
    return same;
}

START_TEST(dash_is_standard_input)
{
    const char *dir = fresh_dir("in-dash");
    char ref[700], got[700], feat[700], graphml[700], args[2048];
    snprintf(ref, sizeof ref, "%s/ref.npy", dir);
    snprintf(got, sizeof got, "%s/got.npy", dir);
    snprintf(feat, sizeof feat, "%s/x.npy", dir);
    snprintf(graphml, sizeof graphml, "%s/p.graphml", dir);
    /* a graph file on stdin, its format named */
    snprintf(args, sizeof args, "run " GRAPH " --out %s --quiet", ref);
    expect_cli(args, 0, 1, "");
    snprintf(args, sizeof args, "run - --format edgelist --out %s --quiet", got);
    ck_assert_int_eq(run_cli_stdin(args, GRAPH, NULL), 0);
    ck_assert(same_bytes(ref, got));
    /* GraphML (checked, then read: both from the one copy of stdin) */
    snprintf(args, sizeof args, "pattern causal --nodes 5 --out %s --quiet", graphml);
    expect_cli(args, 0, 1, "");
    snprintf(args, sizeof args, "run %s --out %s --quiet", graphml, ref);
    expect_cli(args, 0, 1, "");
    snprintf(args, sizeof args, "run - --format graphml --out %s --quiet", got);
    ck_assert_int_eq(run_cli_stdin(args, graphml, NULL), 0);
    ck_assert(same_bytes(ref, got));
    /* without a format: a usage error */
    char *err;
    ck_assert_int_eq(run_cli_stdin("run - --quiet", GRAPH, &err), 2);
    ck_assert_ptr_nonnull(strstr(err, "needs --format"));
    free(err);
    /* features on stdin */
    snprintf(args, sizeof args, "run " GRAPH " --dim 4 --out %s --quiet", feat);
    expect_cli(args, 0, 1, "");
    snprintf(args, sizeof args, "run " GRAPH " --features %s --out %s --quiet", feat, ref);
    expect_cli(args, 0, 1, "");
    snprintf(args, sizeof args, "run " GRAPH " --features - --out %s --quiet", got);
    ck_assert_int_eq(run_cli_stdin(args, feat, NULL), 0);
    ck_assert(same_bytes(ref, got));
    /* one stdin for two inputs: refused */
    ck_assert_int_eq(run_cli_stdin("run - --format edgelist --features -", feat, &err), 2);
    ck_assert_ptr_nonnull(strstr(err, "only one input"));
    free(err);
}
END_TEST

/* Standard input is one input, for every command that reads inputs. */
START_TEST(one_stdin_input_per_command)
{
    static const char *const args[] = {
        "run - --format edgelist --features -",
        "run --csr -,-",
        "inspect - --format gml --q - --k - --v - --top 1",
        "inspect " GRAPH " --q - --k - --v x.npy --top 1",
        "compare --graph - --graph - --format edgelist",
        "compare --graph - --pattern causal --features -",
        "bench --csr -,-",
    };
    for (size_t k = 0; k < sizeof args / sizeof args[0]; k++) {
        char *err;
        ck_assert_int_eq(run_cli_stdin(args[k], GRAPH, &err), 2);
        ck_assert_msg(strstr(err, "only one input can be read from standard input"),
                      "'%s': %s", args[k], err);
        free(err);
    }
}
END_TEST

/* Starts a long run writing DIR/big.npy, sends sig once its temporary exists;
   returns the exit status as a shell reports it. */
/* Does process pid hold open a file of dir (its unnamed temporary)? */
static int holds_file_in(pid_t pid, const char *dir)
{
    char fds[64], link[1300], target[1300];
    snprintf(fds, sizeof fds, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(fds);
    int found = 0;
    for (struct dirent *e; d && !found && (e = readdir(d));) {
        snprintf(link, sizeof link, "%s/%s", fds, e->d_name);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n > 0) {
            target[n] = '\0';
            found = strncmp(target, dir, strlen(dir)) == 0 && target[strlen(dir)] == '/';
        }
    }
    if (d)
        closedir(d);
    return found;
}

/* Starts a long run writing dir/big.npy, waits until it holds its temporary,
   checks that no name of it is in dir meanwhile, and sends sig. */
static int interrupted_run(const char *dir, int sig)
{
    const char *big = in_dir(dir, "big.npy");
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);    /* as a shell would leave them */
        signal(SIGTERM, SIG_DFL);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        execl(AG_CLI_PATH, AG_CLI_PATH, "run", "--pattern", "complete", "--nodes", "30000",
              "--dim", "64", "--threads", "1", "--out", big, "--quiet", (char *)NULL);
        _exit(127);
    }
    int holds = 0;
    for (int k = 0; k < 200 && !holds; k++) {     /* up to 2 s for the start */
        sleep_ms(10);
        holds = holds_file_in(pid, dir);
    }
    sleep_ms(300);
    /* the temporary has no name while the run goes on (O_TMPFILE), so nothing
       can be left behind and no name can be swapped for a symlink */
    const int named = count_entries(dir, ".", NULL);
    kill(pid, sig);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(holds, "the run never opened its temporary");
    ck_assert_msg(named == 0, "the temporary had a name during the run");
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

START_TEST(signal_removes_temporaries)
{
    const char *dir = fresh_dir("out-signal");
    ck_assert_int_eq(interrupted_run(dir, SIGTERM), 143);
    ck_assert_int_eq(count_entries(dir, ".", NULL), 0);
    ck_assert_int_eq(interrupted_run(dir, SIGINT), 130);
    ck_assert_int_eq(count_entries(dir, ".", NULL), 0);
    /* even a kill that no handler sees leaves nothing */
    ck_assert_int_eq(interrupted_run(dir, SIGKILL), 137);
    ck_assert_int_eq(count_entries(dir, ".", NULL), 0);
    ck_assert_int_eq(count_entries(dir, "big", NULL), 0);
}
END_TEST

/* A report that cannot be written (a full disk) fails the run; it once exited 0.
   The full device is made in the scratch directory (1,7 is /dev/full's number). */
START_TEST(unwritable_report_fails)
{
    const char *dir = fresh_dir("out-full");
    const char *full = in_dir(dir, "full");
    if (mknod(full, S_IFCHR | 0666, makedev(1, 7)) != 0) {
        fprintf(stderr, "unwritable_report_fails: mknod: %s (skipped)\n", strerror(errno));
        return;
    }
    char cmd[2048];
    snprintf(cmd, sizeof cmd, AG_CLI_PATH " run " GRAPH " >'%s' 2>/dev/null", full);
    ck_assert_int_eq(run_shell(cmd, 0), 1);
    snprintf(cmd, sizeof cmd, AG_CLI_PATH " run " GRAPH " --quiet >'%s'", full);
    ck_assert_int_eq(run_shell(cmd, 0), 0);   /* nothing to write, nothing lost */
}
END_TEST

Suite *outputs_suite(void)
{
    Suite *s = suite_create("outputs");
    TCase *tc = tcase_create("outputs");
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, fifo_is_written_not_replaced);
    tcase_add_test(tc, char_device_is_written_not_replaced);
    tcase_add_test(tc, symlink_is_followed);
    tcase_add_test(tc, dash_is_standard_output);
    tcase_add_test(tc, dash_is_standard_input);
    tcase_add_test(tc, failed_run_keeps_the_old_file);
    tcase_add_test(tc, two_outputs_one_file_refused);
    tcase_add_test(tc, extension_must_match);
    tcase_add_test(tc, signal_removes_temporaries);
    tcase_add_test(tc, standard_output_appends);
    tcase_add_test(tc, read_only_target_refused);
    tcase_add_test(tc, early_reader_keeps_outputs);
    tcase_add_test(tc, one_stdin_input_per_command);
    tcase_add_test(tc, direct_attn_falls_back_to_csv);
    tcase_add_test(tc, failure_after_writing_keeps_old_files);
    tcase_add_test(tc, unwritable_report_fails);
    suite_add_tcase(s, tc);
    return s;
}
