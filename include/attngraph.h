/*
 * attngraph — attention as message passing on graphs: everything.
 *
 * attngraph/core.h: arrays, CSR, patterns, attention, rounds, gradients,
 *                   training, .npy (no igraph header needed);
 * attngraph/igraph.h: graph files and igraph graphs (includes <igraph.h>);
 * attngraph/partition.h: destinations split over P processes, halos, METIS
 *                   (no igraph header needed);
 * attngraph/draw.h: pictures as SVG (no igraph header needed).
 * Conventions, errors and threads: see attngraph/core.h.
 */
#ifndef ATTNGRAPH_H
#define ATTNGRAPH_H

#include "attngraph/core.h"
#include "attngraph/igraph.h"
#include "attngraph/partition.h"
#include "attngraph/draw.h"

#endif /* ATTNGRAPH_H */
