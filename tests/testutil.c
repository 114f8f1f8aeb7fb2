#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

extern char test_scratch_dir[];

const char *tmp_path(const char *name)
{
    static char buf[8][512];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, 512, "%s/%s", test_scratch_dir, name);
    return p;
}

void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *s = malloc(cap + 1);
    while ((got = fread(s + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap)
            s = realloc(s, (cap *= 2) + 1);
    }
    fclose(f);
    s[n] = '\0';
    return s;
}

int file_exists(const char *path)
{
    return access(path, F_OK) == 0;
}

void fill_uniform(float *x, int64_t n, uint64_t seed, float scale)
{
    uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(s >> 11) / 9007199254740992.0;   /* [0, 1) */
        x[i] = (float)((2 * u - 1) * scale);
    }
}

void build_graph(igraph_t *g, int64_t N, const int64_t *src, const int64_t *dst, int64_t E,
                 int directed)
{
    igraph_vector_int_t edges;
    igraph_vector_int_init(&edges, 2 * E);
    for (int64_t e = 0; e < E; e++) {
        VECTOR(edges)[2 * e] = src[e];
        VECTOR(edges)[2 * e + 1] = dst[e];
    }
    ck_assert_int_eq(igraph_create(g, &edges, N, directed), IGRAPH_SUCCESS);
    igraph_vector_int_destroy(&edges);
}

double max_abs_diff_fd(const float *a, const double *b, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (!(e <= m))
            m = e;   /* NaN propagates as a failure */
    }
    return m;
}

int run_cli(const char *args, char **out, char **err)
{
    return run_cli_input(args, "/dev/null", out, err);
}

int run_cli_input(const char *args, const char *stdin_path, char **out, char **err)
{
    const char *o = tmp_path("cli.stdout"), *e = tmp_path("cli.stderr");
    char cmd[8192];
    snprintf(cmd, sizeof cmd, AG_CLI_PATH " %s >'%s' 2>'%s' <'%s'", args, o, e, stdin_path);
    int status = system(cmd);
    if (out)
        *out = read_text(o);
    if (err)
        *err = read_text(e);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Writes a version-1.0 .npy file with the given header fields and raw data. */
void write_npy_raw(const char *path, const char *descr, int fortran, const char *shape,
                   const void *data, size_t nbytes)
{
    char dict[256];
    int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }",
                       descr, fortran ? "True" : "False", shape);
    int pad = (64 - (10 + len + 1) % 64) % 64;
    unsigned hl = (unsigned)(len + pad + 1);
    FILE *f = fopen(path, "wb");
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, hl & 0xff, hl >> 8};
    fwrite(pre, 1, 10, f);
    fwrite(dict, 1, (size_t)len, f);
    for (int i = 0; i < pad; i++)
        fputc(' ', f);
    fputc('\n', f);
    fwrite(data, 1, nbytes, f);
    fclose(f);
}

void expect_cli(const char *args, int code, int stream, const char *needle)
{
    char *out, *err;
    int rc = run_cli(args, &out, &err);
    const char *text = stream == 1 ? out : err;
    ck_assert_msg(rc == code, "'%s' exited %d, expected %d; stderr: %s", args, rc, code, err);
    ck_assert_msg(strstr(text, needle), "'%s': output lacks '%s':\n%s", args, needle, text);
    if (code != 0)   /* failures say one clear line on stderr */
        ck_assert_msg(strchr(err, '\n') && (code == 2 || strchr(err, '\n')[1] == '\0'),
                      "'%s': stderr is not one line: %s", args, err);
    free(out), free(err);
}

int fifo_writer(const char *path, const char *text)
{
    unlink(path);
    ck_assert_msg(mkfifo(path, 0600) == 0, "mkfifo %s", path);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        alarm(10);   /* nobody opened it: give up rather than hang the test */
        int fd = open(path, O_WRONLY);
        size_t len = strlen(text), done = 0;
        while (fd >= 0 && done < len) {
            ssize_t n = write(fd, text + done, len - done);
            if (n <= 0)
                break;
            done += (size_t)n;
        }
        _exit(fd >= 0 && done == len ? 0 : 1);
    }
    return (int)pid;
}

void fifo_wait(int pid)
{
    int status;
    ck_assert_int_eq(waitpid((pid_t)pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the FIFO writer failed");
}

/* Reads an --attn CSV's rows as "src,dst,added" triples (added -1 without the column). */
int64_t attn_csv_rows(const char *path, int64_t rows[][3], int64_t cap)
{
    char *text = read_text(path);
    ck_assert_ptr_nonnull(text);
    const int has_added = strncmp(text, "src,dst,src_label,dst_label,head,weight,added\n", 46) == 0;
    int64_t n = 0;
    for (char *p = strchr(text, '\n'); p && p[1]; p = strchr(p + 1, '\n')) {
        ck_assert_int_lt(n, cap);
        long long u, v;
        ck_assert_int_eq(sscanf(p + 1, "%lld,%lld", &u, &v), 2);
        const char *end = strchr(p + 1, '\n');
        rows[n][0] = u, rows[n][1] = v;
        rows[n][2] = has_added ? end[-1] - '0' : -1;
        n++;
    }
    free(text);
    return n;
}

void expect_same_bytes(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    ck_assert_msg(fa && fb, "%s or %s is missing", a, b);
    int ca, cb;
    long at = 0;
    do {
        ca = fgetc(fa), cb = fgetc(fb);
        ck_assert_msg(ca == cb, "%s and %s differ at byte %ld", a, b, at);
        at++;
    } while (ca != EOF);
    fclose(fa), fclose(fb);
}

void expect_planted_predictions(const ag_model_t *m, const char *pred)
{
    igraph_t g;
    ag_nbhd_t nb;
    ag_matrix_t x;
    ag_error_t e;
    int64_t *want, n;
    ck_assert_int_eq(ag_graph_load(&g, "graphs/planted.gml", NULL, &e), AG_OK);
    ck_assert_int_eq(ag_nbhd_from_graph(&nb, &g, &e), AG_OK);
    ck_assert_int_eq(ag_matrix_read_npy(&x, "graphs/planted/x.npy", &e), AG_OK);
    ck_assert_int_eq(ag_index_read_npy(&want, &n, pred, &e), AG_OK);
    ck_assert_int_eq(n, x.rows);
    int64_t *got = malloc((size_t)n * sizeof *got);
    ck_assert_msg(ag_model_predict(m, &nb, x.data, NULL, got, &e) == AG_OK, "%s", e.msg);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "%s: node %lld: %lld, expected %lld", pred,
                      (long long)i, (long long)got[i], (long long)want[i]);
    free(got), free(want);
    ag_matrix_destroy(&x);
    ag_nbhd_destroy(&nb);
    igraph_destroy(&g);
}
