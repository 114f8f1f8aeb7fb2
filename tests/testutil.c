#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    const char *o = tmp_path("cli.stdout"), *e = tmp_path("cli.stderr");
    char cmd[8192];
    snprintf(cmd, sizeof cmd, AG_CLI_PATH " %s >'%s' 2>'%s' </dev/null", args, o, e);
    int status = system(cmd);
    if (out)
        *out = read_text(o);
    if (err)
        *err = read_text(e);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Asserts the CLI exits with `code` and that `needle` appears in stream (1 out, 2 err). */
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
