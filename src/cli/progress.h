/* What a long run tells the person waiting: an estimate before it starts and
   progress on standard error while it runs. */
#ifndef AG_CLI_PROGRESS_H
#define AG_CLI_PROGRESS_H

#include <stdint.h>

#include "cli/cli.h"

typedef struct {
    int show;           /* progress lines at all */
    int forced;         /* --progress: from the start, one line per report when not a terminal */
    int tty;            /* standard error is a terminal: one line, rewritten */
    int rounds;
    double t0, last;    /* start, last line */
    int open_line;      /* a rewritten line is on the terminal */
} progress_t;

/* mode: -1 automatic (a terminal, and not quiet), 0 off, 1 on. */
void progress_begin(progress_t *p, int mode, int quiet, int rounds);
/* ag_attention_opts_t's progress within round `round` (ctx: the progress_t). */
void progress_attention(int round, int64_t done, int64_t total, void *ctx);
/* Round `round` is done. */
void progress_round(progress_t *p, int round);
/* Clears a rewritten line. */
void progress_end(progress_t *p);

/*
 * The time the run's attention and projections should take at this machine's
 * rate, measured on a small case of the same kind of kernel when the work is
 * large; printed on standard error when above about a minute (unless
 * --no-progress, or --quiet without --progress). estimate_early runs right
 * after the connectivity is known, for shapes the options decide;
 * estimate_late once the inputs are loaded, for shapes files decide.
 */
void estimate_early(const run_opts_t *o, const ag_nbhd_t *nb);
void estimate_late(const run_opts_t *o, const inputs_t *in, const ag_nbhd_t *nb);

#endif
