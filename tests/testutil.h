/* Helpers shared by the Check suites. */
#ifndef AG_TESTUTIL_H
#define AG_TESTUTIL_H

#include <check.h>
#include <stdint.h>

#include "attngraph.h"

/* The documented defaults, stated independently of the library's initialisers
   (0 means 0 in every field): tables write {SCORE_DEFAULTS, .kind = ..., .beta = 3}
   and a later field overrides a default, as C11 6.7.9 allows. */
#define SCORE_DEFAULTS .beta = 1.0f, .slope = 0.2f
#define ROUND_DEFAULTS .ln_eps = 1e-5f
#define OPTIMIZER_DEFAULTS .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f
#if defined(__clang__)
#pragma clang diagnostic ignored "-Winitializer-overrides"
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Woverride-init"
#endif

/* A file name inside the run's scratch folder (made by the runner). */
const char *tmp_path(const char *name);
/* Writes text to path. */
void write_text(const char *path, const char *text);
/* Reads a whole file into a malloc'ed string (NULL if it does not exist). */
char *read_text(const char *path);
int file_exists(const char *path);
/* Writes a version-1.0 .npy file with the given header fields and raw data. */
void write_npy_raw(const char *path, const char *descr, int fortran, const char *shape,
                   const void *data, size_t nbytes);

/* Deterministic uniform values in [-scale, scale] (the tests' own generator). */
void fill_uniform(float *x, int64_t n, uint64_t seed, float scale);

/* igraph graph from message arrays. */
void build_graph(igraph_t *g, int64_t N, const int64_t *src, const int64_t *dst, int64_t E,
                 int directed);

/* Files a and b hold the same bytes (asserted, naming the first that differs). */
void expect_same_bytes(const char *a, const char *b);
/* m's classes of graphs/planted.gml's nodes from graphs/planted/x.npy
   (ag_model_predict) are, node for node, those in the int64 .npy at pred
   (what train --predict wrote). */
void expect_planted_predictions(const ag_model_t *m, const char *pred);

/* Largest |a - b|. */
double max_abs_diff_fd(const float *a, const double *b, int64_t n);

/* Runs `build/attngraph ARGS`, stdout and stderr captured; returns the exit code. */
int run_cli(const char *args, char **out, char **err);

/* Like run_cli, with standard input read from stdin_path (test_outputs.c keeps
   a static run_cli_stdin of its own). */
int run_cli_input(const char *args, const char *stdin_path, char **out, char **err);

/* Makes a FIFO at path and starts a child that writes text into it once a
   reader opens it (the child gives up after 10 s); returns the child's pid. */
int fifo_writer(const char *path, const char *text);
/* Waits for a fifo_writer child; asserts that it wrote everything. */
void fifo_wait(int pid);

/* Runs `build/attngraph ARGS` and asserts that it exits with `code` and that
   `needle` appears in stream (1 stdout, 2 stderr); a failure says one line (exit 1)
   or a line and the help hint (exit 2) on stderr. */
void expect_cli(const char *args, int code, int stream, const char *needle);

/* Asserts that rc is the expected failure and that the message mentions `needle`. */
#define ck_assert_fails_with(rc, err, code, needle)                                        \
    do {                                                                                   \
        ck_assert_int_eq((rc), (code));                                                    \
        ck_assert_msg(strstr((err).msg, (needle)) != NULL, "message '%s' lacks '%s'",      \
                      (err).msg, (needle));                                                \
    } while (0)

Suite *npy_suite(void);
Suite *npz_suite(void);
Suite *graph_suite(void);
Suite *kernel_suite(void);
Suite *pattern_suite(void);
Suite *pattern_graph_suite(void);
Suite *gps_suite(void);
Suite *score_suite(void);
Suite *kernel_plan_suite(void);
Suite *fast_suite(void);
Suite *model_suite(void);
Suite *cli_suite(void);
Suite *runtime_suite(void);
Suite *hostile_suite(void);
Suite *options_suite(void);
Suite *outputs_suite(void);
Suite *graph_files_suite(void);
Suite *compare_suite(void);
Suite *figures_suite(void);
Suite *fuzz_suite(void);
Suite *transpose_suite(void);
Suite *backward_suite(void);
Suite *train_cli_suite(void);
Suite *training_suite(void);
Suite *layers_suite(void);
Suite *lm_suite(void);
Suite *lm_data_suite(void);
Suite *model_file_suite(void);
Suite *fused_backward_suite(void);
Suite *part_suite(void);
Suite *draw_suite(void);
Suite *draw_cli_suite(void);
Suite *partition_suite(void);
Suite *plan_suite(void);
Suite *self_loops_suite(void);
Suite *budget_suite(void);
Suite *tape_suite(void);
Suite *sgemm_suite(void);

/* Reads an --attn CSV's rows as "src,dst,added" triples (added -1 without the
   column); at most cap rows. */
int64_t attn_csv_rows(const char *path, int64_t rows[][3], int64_t cap);

#endif
