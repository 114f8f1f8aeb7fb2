/* What a run shows a person: the summary on stdout and per-edge attention files. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/cli.h"
#include "base/base.h"

void csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

int result_weights(const result_t *r, const inputs_t *in, const source_t *s, int64_t lo,
                   int64_t hi, float *W, ag_error_t *err)
{
    if (!r->Q)
        return ag_fail(err, AG_EINVAL, "no attention to report: no round ran");
    return ag_attention_weights(&s->nb, r->Q, r->K, in->H, in->d, &r->score, lo, hi, W, err);
}

/* Weights of destinations 0..show-1, mean over heads, with each slot's source. */
static int mean_weights(const result_t *r, const inputs_t *in, const source_t *s, int64_t show,
                        float **w_out, int64_t **src_out, ag_error_t *err)
{
    const int64_t E = s->nb.edge_ptr[show], H = in->H;
    float *W = *w_out = ag_alloc(E * H + 1, sizeof *W, err, "summary");
    int64_t *src = *src_out = ag_alloc(E + 1, sizeof *src, err, "summary");
    if (!W || !src)
        return ag_alloc_status();
    int rc = result_weights(r, in, s, 0, show, W, err);
    if (!rc) {
        ag_nbhd_sources(&s->nb, 0, show, src);
        for (int64_t e = 0; e < E; e++) {
            double m = 0;
            for (int64_t h = 0; h < H; h++)
                m += W[e * H + h];
            W[e] = (float)(m / (double)H);
        }
    }
    return rc;
}

const char *weights_note(const result_t *r)
{
    return r->score.kind == AG_SCORE_SIGMOID ? "; sigmoid weights need not sum to 100%" : "";
}

int report_summary(FILE *f, const result_t *r, const inputs_t *in, const source_t *s,
                   int64_t show, ag_error_t *err)
{
    enum { TOP = 3 };
    const ag_nbhd_t *nb = &s->nb;
    if (show > nb->n_nodes)
        show = nb->n_nodes;
    float *w = NULL;
    int64_t *src = NULL;
    int rc = mean_weights(r, in, s, show, &w, &src, err);
    for (int64_t i = 0; !rc && i < show; i++) {
        /* Sources ascend, so a multi-edge's slots are adjacent: sum them. */
        int64_t best[TOP];
        double best_w[TOP];
        int n_best = 0;
        for (int64_t e = nb->edge_ptr[i]; e < nb->edge_ptr[i + 1];) {
            int64_t j = src[e];
            double total = 0;
            for (; e < nb->edge_ptr[i + 1] && src[e] == j; e++)
                total += w[e];
            int at = n_best < TOP ? n_best++ : TOP;
            while (at > 0 && best_w[at - 1] < total) {
                if (at < TOP)
                    best[at] = best[at - 1], best_w[at] = best_w[at - 1];
                at--;
            }
            if (at < TOP)
                best[at] = j, best_w[at] = total;
        }
        char buf[AG_LABEL_NUMBER_SIZE];
        fprintf(f, "  '%s' attends ", ag_label(&s->labels, i, buf, sizeof buf));
        if (n_best == 0)
            fputs("nothing (no in-edges)", f);
        for (int b = 0; b < n_best; b++)
            fprintf(f, "%s'%s': %.1f%%", b ? ", " : "",
                    ag_label(&s->labels, best[b], buf, sizeof buf), 100.0 * best_w[b]);
        fputc('\n', f);
    }
    if (!rc && nb->n_nodes > show)
        fprintf(f, "  ... and %lld more nodes\n", (long long)(nb->n_nodes - show));
    free(w);
    free(src);
    return rc;
}

/* ---- per-edge exports ---- */

static int write_csv(const char *path, const ag_edge_msg_t *msgs, const int64_t *slot,
                     const float *W, int64_t E, int64_t H, const ag_labels_t *labels,
                     ag_error_t *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return ag_fail(err, AG_EIO, "%s: cannot write: %s", path, strerror(errno));
    /* self-loops added by --self-loops on or replace (edge id -1) come last, added=1 */
    const int added = E > 0 && msgs[E - 1].edge_id < 0;
    fputs(added ? "src,dst,src_label,dst_label,head,weight,added\n"
                : "src,dst,src_label,dst_label,head,weight\n", f);
    for (int64_t k = 0; k < E; k++)
        for (int64_t h = 0; h < H; h++) {
            fprintf(f, "%lld,%lld,", (long long)msgs[k].src, (long long)msgs[k].dst);
            char buf[AG_LABEL_NUMBER_SIZE];
            csv_field(f, ag_label(labels, msgs[k].src, buf, sizeof buf));
            fputc(',', f);
            csv_field(f, ag_label(labels, msgs[k].dst, buf, sizeof buf));
            fprintf(f, ",%lld,%.9g", (long long)h, W[slot[k] * H + h]);
            fputs(!added ? "\n" : msgs[k].edge_id < 0 ? ",1\n" : ",0\n", f);
        }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return ag_fail(err, AG_EIO, "%s: write failed: %s", path, strerror(errno));
    return AG_OK;
}

/* The graph (a copy, or the pattern materialised) with attn_h<h> and attn_mean on
   its edges. An undirected edge's two messages become two attributes each way:
   its attributes hold the message from the smaller node, the other direction
   goes to attn_back_h<h>. Self-loops added by --self-loops on or replace become
   edges after the graph's own, with the edge attribute added = 1 (0 on the
   others; a self edge of the file that off or replace removed stays, weight 0).
   A graph materialised from the messages (materialised) has them already: edge
   k is message k. */
static int add_loops(igraph_t *g, const ag_edge_msg_t *msgs, int64_t E, int64_t *eid,
                     int materialised, const char *path, ag_error_t *err)
{
    int64_t n_graph = igraph_ecount(g), n_added = 0;
    for (int64_t k = 0; k < E; k++)
        eid[k] = materialised ? k : msgs[k].edge_id >= 0 ? msgs[k].edge_id : n_graph + n_added++;
    for (int64_t k = 0; materialised && k < E; k++)
        n_added += msgs[k].edge_id < 0;
    n_graph -= materialised ? n_added : 0;
    if (n_added == 0)
        return AG_OK;
    igraph_vector_int_t pairs;
    igraph_vector_t flag;
    if (igraph_vector_int_init(&pairs, 2 * n_added))
        return ag_fail(err, AG_ENOMEM, "%s: out of memory", path);
    for (int64_t k = E - n_added, t = 0; k < E; k++, t += 2)
        VECTOR(pairs)[t] = VECTOR(pairs)[t + 1] = msgs[k].src;
    int rc = (!materialised && igraph_add_edges(g, &pairs, NULL)) ||
             igraph_vector_init(&flag, n_graph + n_added);
    igraph_vector_int_destroy(&pairs);
    if (!rc) {
        for (int64_t e = n_graph; e < n_graph + n_added; e++)
            VECTOR(flag)[e] = 1;
        rc = igraph_cattribute_EAN_setv(g, "added", &flag);
        igraph_vector_destroy(&flag);
    }
    return rc ? ag_fail(err, AG_ENOMEM, "%s: out of memory", path) : AG_OK;
}

static int write_graphml(const char *path, const ag_edge_msg_t *msgs, const int64_t *slot,
                         const float *W, int64_t E, int64_t H, const source_t *s,
                         int64_t max_export, ag_error_t *err)
{
    igraph_t g;
    int rc = s->have_graph ? (igraph_copy(&g, &s->graph) ? ag_fail(err, AG_ENOMEM, "%s: out of "
                                                                  "memory", path) : AG_OK)
                           : ag_graph_from_nbhd(&g, &s->nb, max_export, err);
    if (rc)
        return rc;
    int64_t *eid = ag_alloc(E + 1, sizeof *eid, err, path);
    if (!eid || (rc = add_loops(&g, msgs, E, eid, !s->have_graph, path, err))) {
        free(eid);
        igraph_destroy(&g);
        return eid ? rc : ag_alloc_status();
    }
    const int64_t n_edges = igraph_ecount(&g);
    igraph_vector_t col;
    if (igraph_vector_init(&col, n_edges)) {
        free(eid);
        igraph_destroy(&g);
        return ag_fail(err, AG_ENOMEM, "%s: out of memory", path);
    }
    char name[64];
    for (int64_t h = 0; h <= H && !rc; h++) {
        /* h == H: the mean over heads */
        for (int back = 0; back < 2 && !rc; back++) {
            int any = 0;
            igraph_vector_fill(&col, 0);
            for (int64_t k = 0; k < E; k++) {
                const int is_back = k > 0 && eid[k] == eid[k - 1];
                if (is_back != back)
                    continue;
                double x = 0;
                for (int64_t c = h == H ? 0 : h; c < (h == H ? H : h + 1); c++)
                    x += W[slot[k] * H + c];
                VECTOR(col)[eid[k]] = h == H ? x / (double)H : x;
                any = 1;
            }
            if (!any)
                continue;
            if (h == H)
                snprintf(name, sizeof name, back ? "attn_back_mean" : "attn_mean");
            else
                snprintf(name, sizeof name, back ? "attn_back_h%lld" : "attn_h%lld", (long long)h);
            if (igraph_cattribute_EAN_setv(&g, name, &col))
                rc = ag_fail(err, AG_ENOMEM, "%s: out of memory", path);
        }
    }
    igraph_vector_destroy(&col);
    free(eid);
    if (!rc)
        rc = ag_graph_write(&g, path, AG_FORMAT_GRAPHML, &s->labels, err);
    igraph_destroy(&g);
    return rc;
}

int attn_size_check(const run_opts_t *o, int64_t E, ag_error_t *err)
{
    const int64_t weights = E * o->heads;
    if (!o->n_attn || weights <= o->max_export)
        return AG_OK;
    return ag_fail(err, AG_ELIMIT, "--attn would hold %lld weights (%lld message%s x %lld "
                   "head%s), more than --max-edges %lld", (long long)weights, (long long)E,
                   AG_PLURAL(E), (long long)o->heads, AG_PLURAL(o->heads),
                   (long long)o->max_export);
}

int report_attention(const out_file_t *out, const result_t *r,
                     const inputs_t *in, const source_t *s, int64_t max_export,
                     ag_error_t *err)
{
    const char *path = out->file.path, *name = out->target;
    /* out_open_all checked a file's extension; standard output, a device or a
       FIFO takes .npy or .graphml as a hint and is CSV otherwise */
    const char *ext = out_extension(out);
    if (strcasecmp(ext, "npy") && strcasecmp(ext, "graphml"))
        ext = "csv";
    const int64_t E = s->nb.n_edges, H = in->H;
    if (E * H > max_export)
        return ag_fail(err, AG_ELIMIT, "%s would hold %lld weights (%lld message%s x %lld "
                       "head%s), more than --max-edges %lld", name, (long long)(E * H), (long long)E,
                       AG_PLURAL(E), (long long)H, AG_PLURAL(H), (long long)max_export);
    ag_edge_msg_t *msgs = NULL;
    int64_t *slot = NULL;
    float *W = ag_alloc(E * H + 1, sizeof *W, err, name), *ordered = NULL;
    int rc = W ? result_weights(r, in, s, 0, s->nb.n_nodes, W, err) : ag_alloc_status();
    if (!rc)
        rc = ag_edge_order(&s->nb, &msgs, &slot, err);
    if (!rc && strcasecmp(ext, "csv") == 0) {
        rc = write_csv(path, msgs, slot, W, E, H, &s->labels, err);
    } else if (!rc && strcasecmp(ext, "npy") == 0) {
        /* [E, H] in the graph's edge order */
        if (!(ordered = ag_alloc(E * H + 1, sizeof *ordered, err, name)))
            rc = ag_alloc_status();
        for (int64_t k = 0; !rc && k < E; k++)
            memcpy(ordered + k * H, W + slot[k] * H, (size_t)H * sizeof *W);
        if (!rc)
            rc = ag_npy_write_f32(path, ordered, E, H, err);
    } else if (!rc) {
        rc = write_graphml(path, msgs, slot, W, E, H, s, max_export, err);
    }
    free(W);
    free(ordered);
    free(msgs);
    free(slot);
    return rc;
}
