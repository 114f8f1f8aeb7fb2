/*
 * io/: files in and out: graph files in six formats (graph_files.c,
 * graphml.c) and .npy arrays (npy.c). The one header of io/ that other
 * folders include.
 */
#ifndef AG_IO_H
#define AG_IO_H

#include "base/base.h"

/* Entries first .. first+count-1 of a 1-D integer .npy file (a seek, not the
   whole file) into *values (malloc'ed); *total gets the file's length. */
AG_INTERNAL
int ag_i_index_read_npy_part(int64_t **values, int64_t *total, const char *path, int64_t first,
                             int64_t count, ag_error_t *err);

#endif
