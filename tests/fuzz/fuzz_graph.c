/*
 * Graph files, as `attngraph run GRAPH` opens them: ag_graph_load, labels,
 * compiled neighbourhoods, self-loops, edge order, an edge attribute.
 * Byte 0: format (low 3 bits: edgelist, ncol, lgl, graphml, gml, pajek) and
 * direction (bits 3-4); byte 1: self-loop mode. The rest is the file.
 */
#include <stdlib.h>

#include "attngraph.h"
#include "fuzz_common.h"

#define MAX_NODES 1000

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_setup();
    return 0;
}

static const ag_format_t formats[6] = {AG_FORMAT_EDGELIST, AG_FORMAT_NCOL, AG_FORMAT_LGL,
                                       AG_FORMAT_GRAPHML, AG_FORMAT_GML, AG_FORMAT_PAJEK};
static const char *const names[6] = {"g.edges", "g.ncol", "g.lgl", "g.graphml", "g.gml",
                                     "g.net"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    int f = data[0] % 6;
    const char *path = fuzz_path(names[f]);
    if (fuzz_write(path, data + 2, size - 2))
        return 0;
    /* format given, or from the extension (the same format) */
    ag_load_opts_t opts = {data[0] & 0x80 ? AG_FORMAT_AUTO : formats[f], MAX_NODES,
                           (ag_direction_t)((data[0] >> 3) % 3)};
    ag_error_t err;
    igraph_t g;
    if (ag_graph_load(&g, path, &opts, &err) != AG_OK)
        return 0;
    ag_labels_t labels;
    ag_nbhd_t nb;
    if (ag_labels_from_graph(&labels, &g, &err) == AG_OK &&
        ag_nbhd_from_graph(&nb, &g, &err) == AG_OK) {
        if (ag_nbhd_self_loops(&nb, (ag_self_loops_t)(data[1] % 3), &err) == AG_OK) {
            ag_edge_msg_t *msgs = NULL;
            int64_t *slot = NULL;
            ag_edge_order(&nb, &msgs, &slot, &err);
            free(msgs);
            free(slot);
            float *bias = NULL;
            ag_edge_attribute(&bias, &g, &nb, data[1] & 4 ? "weight" : "bias", &err);
            free(bias);
            if (data[1] & 8) {   /* and back, as run --attn x.graphml writes it */
                igraph_t back;
                if (ag_graph_from_nbhd(&back, &nb, 100000, &err) == AG_OK)
                    igraph_destroy(&back);
            }
        }
        ag_nbhd_destroy(&nb);
    }
    ag_labels_destroy(&labels);
    igraph_destroy(&g);
    return 0;
}
