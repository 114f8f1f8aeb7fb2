/*
 * The command line: argv from the input, run through the tool's own main
 * (src/cli/main.c compiled with -Dmain=attngraph_main).
 *
 * The input is the arguments after "attngraph", one per line (at most 24).
 * To keep every run small and inside its folder, an input is skipped when
 *   - an argument contains '/' (every path is then a name in the current
 *     folder, which is the fuzzer's temporary folder while the input runs), or
 *   - a number in it has more than 2 digits or exceeds 16 (--nodes, --dim,
 *     --heads, --rounds, --reps, --top ... stay tiny; pattern sizes too).
 * Before each input the folder is emptied and refilled with small inputs the
 * arguments can name: g.edges g.gml g.graphml g.net q.npy k.npy v.npy x.npy
 * (4 nodes, H*d = D = 4), w/ (wq wk wv wo), labels.txt (4 lines),
 * indptr.npy + indices.npy (a CSR of 4 nodes). Outputs land there too.
 * Standard input reads /dev/null; --help and --version only print.
 * Nothing the tool runs can exit the process: commands return their status.
 * (cli_short_waits would restart a process without GOMP_SPINCOUNT with execv:
 * GOMP_SPINCOUNT is set.)
 */
#define _XOPEN_SOURCE 700
#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attngraph.h"
#include "fuzz_common.h"

int attngraph_main(int argc, char **argv);

#define MAX_ARGS 24

static char home[4096];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_setup();
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) {
        dup2(null, 0);
        close(null);
    }
    if (!getcwd(home, sizeof home))
        abort();
    return 0;
}

static void put_text(const char *name, const char *text)
{
    fuzz_write(fuzz_path(name), (const uint8_t *)text, strlen(text));
}

static void put_npy(const char *name, int64_t rows, int64_t cols, uint64_t stream)
{
    float v[64];
    ag_random_normal(v, rows * cols, 5, stream, 0.5f);
    ag_error_t err;
    ag_npy_write_f32(fuzz_path(name), v, rows, cols, &err);
}

static void put_index(const char *name, const int64_t *v, int64_t n)
{
    /* version 1.0: magic, version, header length, header padded to 128 bytes in all */
    char head[128];
    memcpy(head, "\x93NUMPY\x01\x00\x76\x00", 10);
    int len = snprintf(head + 10, sizeof head - 10,
                       "{'descr': '<i8', 'fortran_order': False, 'shape': (%lld,), }",
                       (long long)n);
    memset(head + 10 + len, ' ', sizeof head - 10 - (size_t)len);
    head[127] = '\n';
    FILE *f = fopen(fuzz_path(name), "wb");
    if (!f)
        return;
    fwrite(head, 1, sizeof head, f);
    fwrite(v, sizeof *v, (size_t)n, f);
    fclose(f);
}

static void fixtures(void)
{
    fuzz_clear();
    put_text("g.edges", "0 1\n1 2\n2 3\n3 0\n0 2\n");
    put_text("g.gml", "graph [ directed 1\n node [ id 0 label \"a\" ]\n node [ id 1 label \"b\" ]\n"
                      " node [ id 2 label \"c\" ]\n node [ id 3 label \"d\" ]\n"
                      " edge [ source 0 target 1 weight 0.5 ]\n edge [ source 1 target 2 weight 1 ]\n"
                      " edge [ source 2 target 3 weight 2 ]\n edge [ source 3 target 0 weight 1 ]\n]\n");
    put_text("g.graphml",
             "<?xml version=\"1.0\"?>\n<graphml xmlns=\"http://graphml.graphdrawing.org/xmlns\">\n"
             "<key id=\"w\" for=\"edge\" attr.name=\"weight\" attr.type=\"double\"/>\n"
             "<graph edgedefault=\"directed\"><node id=\"a\"/><node id=\"b\"/><node id=\"c\"/>"
             "<node id=\"d\"/>\n<edge source=\"a\" target=\"b\"><data key=\"w\">1</data></edge>\n"
             "<edge source=\"b\" target=\"c\"><data key=\"w\">2</data></edge>\n"
             "<edge source=\"c\" target=\"d\"><data key=\"w\">3</data></edge></graph></graphml>\n");
    put_text("g.net", "*Vertices 4\n1 \"a\"\n2 \"b\"\n3 \"c\"\n4 \"d\"\n*Arcs\n1 2\n2 3\n3 4\n4 1\n");
    put_text("labels.txt", "w\nx\ny\nz\n");
    put_npy("q.npy", 4, 4, 1);
    put_npy("k.npy", 4, 4, 2);
    put_npy("v.npy", 4, 4, 3);
    put_npy("x.npy", 4, 4, 4);
    mkdir(fuzz_path("w"), 0777);
    put_npy("w/wq.npy", 4, 4, 5);
    put_npy("w/wk.npy", 4, 4, 6);
    put_npy("w/wv.npy", 4, 4, 7);
    put_npy("w/wo.npy", 4, 4, 8);
    static const int64_t indptr[5] = {0, 1, 3, 4, 6}, indices[6] = {0, 0, 1, 2, 1, 3};
    put_index("indptr.npy", indptr, 5);
    put_index("indices.npy", indices, 6);
}

/* 0 when the argument keeps the run small and inside the folder. */
static int refused(const char *a)
{
    if (strchr(a, '/'))
        return 1;
    for (const char *p = a; *p;) {
        if (!isdigit((unsigned char)*p)) {
            p++;
            continue;
        }
        size_t n = strspn(p, "0123456789");
        if (n > 2 || atoi(p) > 16)
            return 1;
        p += n;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 2048)
        return 0;
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    static char arg0[] = "attngraph";
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = arg0;
    for (char *line = text; argc <= MAX_ARGS;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (refused(line))
            goto done;
        argv[argc++] = line;
        if (!nl)
            break;
        line = nl + 1;
    }
    argv[argc] = NULL;
    fixtures();
    if (chdir(fuzz_dir()) != 0)
        abort();
    attngraph_main(argc, argv);
    fflush(stdout);
    if (chdir(home) != 0)
        abort();
done:
    free(text);
    return 0;
}
