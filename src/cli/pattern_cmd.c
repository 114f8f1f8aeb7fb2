/* `attngraph pattern`: write a connectivity pattern as a graph file. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/cli.h"
#include "base/base.h"

#define DEFAULT_MAX_EXPORT ((int64_t)50000000)

static const opt_def_t pattern_options[] = {
    OPT_PROSE("usage: attngraph pattern SPEC (--nodes N | --tokens \"a b c\" | --labels-file F |\n"
              "                               --graph FILE)\n"
              "                         --out FILE [--format F] [--self-loops MODE]\n"
              "\n"
              "Writes a connectivity pattern as a graph file in the format of its extension\n"
              "(or --format: graphml, gml, pajek, ncol, lgl, edgelist, dot; GraphML for a name\n"
              "without one), with labels. A name whose extension is not a graph format is refused.\n"
              "Edge j -> i means destination i attends to source j.\n"
              "\n"
              "Patterns (i = destination/query, j = source/key):\n"
              "  complete             all j (self included)\n"
              "  causal               j <= i\n"
              "  window:W             causal local: i-W < j <= i\n"
              "  window:L,R           two-sided: i-L <= j <= i+R\n"
              "  dilated:W,D          |i-j| <= W and (i-j) mod D == 0\n"
              "  strided:L            j <= i and (i-j) mod L == 0 (Sparse Transformer, strided)\n"
              "  fixed:L,C            causal; same block of L, or j among the last C of its block\n"
              "  prefix:P             prefix LM: j < P or j <= i\n"
              "  global:G             the first G tokens attend to all and are attended by all\n"
              "  global:i1,i2,...     the same for the listed tokens (two or more ids)\n"
              "  random:K[,SEED]      K distinct random sources per destination (BigBird random)\n"
              "  bigbird:B,W,G,R[,SEED]  blocks of B tokens: W sliding, G global, R random blocks\n"
              "  blocks:n1,n2,...     block diagonal: independent documents of these lengths\n"
              "  docs:n1,n2,...       the same, causal inside each document\n"
              "  padding:LEN          keys at positions >= LEN are never attended\n"
              "  cross:S,T            the first S nodes are sources, the next T targets\n"
              "  grid:HxW,R           2-D neighbourhood on an H x W grid: |dx| <= R and |dy| <= R\n"
              "  axial:HxW            same row or same column of the grid\n"
              "  self                 j == i\n"
              "  graph                the edges of the graph file (--graph, or run's GRAPH)\n"
              "  hops:K               the graph's K-hop neighbourhood: a path of 1..K edges j -> i\n"
              "  expander:D[,SEED]    D random permutations and their inverses (Exphormer)\n"
              "  virtual:V            V nodes appended after the others, linked both ways to all\n"
              "Composition: A+B union, A&B intersection ('&' binds tighter), !A complement,\n"
              "parentheses. E.g. 'docs:5,3&window:2', 'causal&!strided:4+global:1'.\n"
              "\n"
              "Options:\n"),
    OPT_VALUE("nodes", OPT_NODES,
              "  --nodes N           number of nodes (default: from --tokens or the pattern)\n"),
    OPT_VALUE("tokens", OPT_TOKENS, "  --tokens \"a b c\"    nodes and their labels at once\n"),
    OPT_VALUE("labels-file", OPT_LABELS_FILE, "  --labels-file F     labels, one a line\n"),
    OPT_VALUE("graph", OPT_GRAPH,
              "  --graph FILE        the graph that graph and hops:K read (its nodes and labels)\n"),
    OPT_VALUE("out", OPT_OUT,
              "  --out FILE          the graph file to write (-: standard output)\n"),
    OPT_VALUE("format", OPT_FORMAT,
              "  --format F          its format (default: from the extension, else graphml);\n"
              "                      it must agree with the extension (.txt fits any)\n"),
    OPT_VALUE("self-loops", OPT_SELF_LOOPS,
              "  --self-loops MODE   on or replace: every node attends to itself once; off: none\n"
              "                      does; keep (default)\n"),
    OPT_VALUE("max-edges", OPT_MAX_EDGES,
              "  --max-edges N       refuse to write more edges (default 50000000)\n"),
    OPT_FLAG("quiet", OPT_QUIET, "  --quiet             print nothing on success\n"),
    OPT_HELP_LINE,
    OPT_DEF_END,
};

int cmd_pattern(int argc, char **argv)
{
    run_opts_t o;
    run_opts_init(&o);
    int64_t max_edges = DEFAULT_MAX_EXPORT;
    opt_parser_t p;
    opt_begin(&p, "pattern", pattern_options, argc, argv);
    int c;
    while ((c = opt_next(&p)) > 0) {
        if (c == OPT_OUT) {
            o.out = p.arg;
        } else if (c == OPT_GRAPH) {
            o.src.graph = p.arg;
        } else if (c == OPT_FORMAT) {
            o.src.format = p.arg;
        } else if (c == OPT_MAX_EDGES) {
            if (opt_int(&max_edges, "pattern", "max-edges", p.arg, 1, INT64_MAX))
                return EXIT_USAGE;
        } else {
            int rc = input_option(&o, c, p.arg, "pattern");
            if (rc)
                return rc;
        }
    }
    if (c < 0)
        return p.status;
    if (p.n_pos == 0)
        return usage_error("pattern", "no pattern SPEC given");
    if (opt_positional(&p, 1))
        return EXIT_USAGE;
    if (!o.out)
        return usage_error("pattern", "no --out FILE given");
    if (input_options_check(&o, "pattern"))
        return EXIT_USAGE;
    o.src.pattern = p.pos[0];

    ag_error_t err = {AG_OK, ""};
    source_t s;
    igraph_t g;
    out_file_t out;
    memset(&s, 0, sizeof s);
    int usage = 0, have_g = 0;
    /* the graph formats ag_graph_write writes, by extension (ag_format_from_path);
       the trailing comma: a name without one is fine (GraphML) */
    out_init(&out, o.out, "--out", "graphml,xml,gml,net,pajek,ncol,lgl,edges,el,txt,edgelist,"
             "dot,gv,");
    int rc = out_open_all(&out, 1, &usage, &err);
    /* The format follows the extension; --format must agree with it. Standard
       output, a FIFO or a device has none: --format, else GraphML. A file
       without an extension is GraphML unless --format says otherwise; .txt is
       plain text, any format (an edge list unless --format says otherwise). */
    ag_format_t format = AG_FORMAT_GRAPHML, by_ext;
    const char *ext = out_extension(&out);
    if (!rc && o.src.format && ag_format_parse(&format, o.src.format, &err))
        usage = 1, rc = AG_EINVAL;
    if (!rc && out.direct && *ext && !o.src.format &&
        !ag_format_from_path(&by_ext, o.out, NULL))
        format = by_ext;              /* a FIFO named p.gml: a hint, not a rule */
    /* out_open_all refused an extension that is not a graph format */
    if (!rc && !out.direct && *ext && !ag_format_from_path(&by_ext, o.out, NULL)) {
        if (o.src.format && by_ext != format && strcasecmp(ext, "txt") != 0)
            usage = 1, rc = ag_fail(&err, AG_EINVAL, "--out %s is %s by its extension, but "
                                    "--format says %s", o.out, ag_format_name(by_ext),
                                    ag_format_name(format));
        else if (!o.src.format)
            format = by_ext;
    }
    const char *fmt_name = ag_format_name(format);
    o.src.format = NULL;              /* it names the output here, not an input */

    if (!rc)
        rc = source_open(&s, &o.src, &usage, &err);
    if (!rc && !(rc = ag_graph_from_nbhd(&g, &s.nb, max_edges, &err)))
        have_g = 1;
    if (!rc)
        rc = ag_graph_write(&g, out.file.path, format, &s.labels, &err);
    if (!rc)
        rc = out_commit(&out, &err);
    if (!rc && !o.quiet)
        printf("pattern '%s' on %lld node%s: %lld edge%s -> %s (%s)\n", o.src.pattern,
               (long long)s.nb.n_nodes, AG_PLURAL(s.nb.n_nodes), (long long)s.nb.n_edges,
               AG_PLURAL(s.nb.n_edges), o.out, fmt_name);
    if (rc) {
        out_name_errors(&out, 1, &err);
        out_abort(&out);
    }
    if (have_g)
        igraph_destroy(&g);
    source_close(&s);
    return finish("pattern", rc, usage, &err);
}
