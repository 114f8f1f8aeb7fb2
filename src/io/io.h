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

/* "ARCHIVE.npz:NAME": 1 with *archive a malloc'ed copy of ARCHIVE.npz (free
   it) and *member NAME (inside path); 0 for any other path; -1 out of memory. */
AG_INTERNAL
int ag_i_npz_split(const char *path, char **archive, const char **member);
/* Member NAME (or NAME.npy) of an .npz archive, inflated and CRC-checked, into
   *data (malloc'ed, *len bytes; free it) (npz.c). */
AG_INTERNAL
int ag_i_npz_member(unsigned char **data, size_t *len, const char *archive, const char *member,
                    ag_error_t *err);
/* The shape of a .npy array (an .npz member too) from its header alone. */
AG_INTERNAL
int ag_i_npy_shape(int *ndim, int64_t shape[AG_NPY_MAX_DIMS], const char *path, ag_error_t *err);
#endif
