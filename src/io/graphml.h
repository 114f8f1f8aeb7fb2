/* GraphML checks that igraph's reader does not make (the only libxml2 user). */
#ifndef AG_GRAPHML_H
#define AG_GRAPHML_H

#include <stddef.h>
#include <stdint.h>

#include "attngraph.h"

/*
 * igraph's GraphML reader silently adds a vertex for an edge to an
 * undeclared node and merges duplicate ids; both are mistakes in the file.
 * Reads the file at path, or when mem is not NULL the mem_len bytes at mem
 * (path then only names it), and refuses undeclared or duplicate node ids,
 * elements without their id, source or target, malformed XML, and more than
 * max_nodes nodes. Memory beyond INT_MAX bytes is refused (AG_ELIMIT):
 * libxml2 takes the length as an int. Time O(n log n) in the ids.
 */
int ag_i_graphml_check_ids(const char *path, const char *mem, size_t mem_len, int64_t max_nodes,
                           ag_error_t *err);

#endif
