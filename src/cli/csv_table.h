/* Small CSV files read whole (draw rounds, draw train). */
#ifndef AG_CLI_CSV_TABLE_H
#define AG_CLI_CSV_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "attngraph.h"

#define CSV_MAX_COLS 16

/* A CSV file: its header's columns and rows of fields (text owned by buf). */
typedef struct {
    char *buf;
    int n_cols;
    char *head[CSV_MAX_COLS];
    int64_t n_rows;
    char **cells;            /* [n_rows, n_cols] */
    const char *path;
} csv_t;

/* Reads path (- : standard input) whole: fields split, quotes as RFC 4180,
   every row as wide as the header. */
int csv_read(csv_t *t, const char *path, ag_error_t *err);
/* The same from text buf [len] (taken over: freed with t); path names it. */
int csv_parse(csv_t *t, char *buf, size_t len, const char *path, ag_error_t *err);
void csv_free(csv_t *t);
/* The column named name, or -1 (with err naming what is missing when required). */
int csv_column(const csv_t *t, const char *name, int required, ag_error_t *err);
/* Row r's number in column c: empty is NaN; anything else must parse. */
int csv_number(const csv_t *t, int64_t r, int c, double *x, ag_error_t *err);

#endif
