/* The attngraph command-line tool: shared declarations. */
#ifndef AG_CLI_H
#define AG_CLI_H

#include <stdio.h>

#include "attngraph.h"

#define EXIT_BAD_INPUT 1
#define EXIT_USAGE 2

/* ---- outputs: written under a temporary name, renamed when all succeeded ---- */

typedef struct {
    const char *target;   /* the user's path, or NULL when unused */
    char tmp[4096];       /* where it is written meanwhile */
} out_file_t;

/* Creates the temporary file beside target (so the rename stays on one disk). */
int out_open(out_file_t *o, const char *target, ag_error_t *err);
/* Renames the temporary file onto the target. */
int out_commit(out_file_t *o, ag_error_t *err);
/* Removes the temporary file and any stale target: a failed run leaves nothing. */
void out_abort(out_file_t *o);

/* ---- reports ---- */

/* The readable summary: for the first `show` nodes, the top sources they
   attend to (mean over heads). Q, K: [N, H*d] of the round to report. */
int report_summary(FILE *f, const ag_nbhd_t *nb, const ag_labels_t *labels, const float *Q,
                   const float *K, int64_t H, int64_t d, int64_t show, ag_error_t *err);

/* Per-edge attention as CSV: src,dst,src_label,dst_label,head,weight in the
   graph's edge order. */
int report_attention_csv(const char *path, const ag_nbhd_t *nb, const ag_labels_t *labels,
                         const float *Q, const float *K, int64_t H, int64_t d, ag_error_t *err);

/* Writes s as a CSV field, quoted when it holds a comma, quote or line break. */
void csv_field(FILE *f, const char *s);

/* ---- commands ---- */

int cmd_run(int argc, char **argv);

#endif
