/* What a run shows a person: the summary on stdout and per-edge CSV. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "internal.h"

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

/* Weights of destinations 0..show-1, mean over heads, with each slot's source. */
static int mean_weights(const ag_nbhd_t *nb, const float *Q, const float *K, int64_t H,
                        int64_t d, int64_t show, float **w_out, int64_t **src_out,
                        ag_error_t *err)
{
    const int64_t E = nb->edge_ptr[show];
    float *W = malloc((size_t)(E * H + 1) * sizeof *W);
    int64_t *src = malloc((size_t)(E + 1) * sizeof *src);
    if (!W || !src) {
        free(W);
        free(src);
        return ag_fail(err, AG_ENOMEM, "summary: out of memory");
    }
    int rc = ag_attention_weights(nb, Q, K, H, d, 0, show, W, err);
    if (!rc) {
        ag_nbhd_sources(nb, 0, show, src);
        for (int64_t s = 0; s < E; s++) {
            double m = 0;
            for (int64_t h = 0; h < H; h++)
                m += W[s * H + h];
            W[s] = (float)(m / (double)H);
        }
    }
    *w_out = W;
    *src_out = src;
    return rc;
}

int report_summary(FILE *f, const ag_nbhd_t *nb, const ag_labels_t *labels, const float *Q,
                   const float *K, int64_t H, int64_t d, int64_t show, ag_error_t *err)
{
    enum { TOP = 3 };
    if (show > nb->n_nodes)
        show = nb->n_nodes;
    float *w = NULL;
    int64_t *src = NULL;
    int rc = mean_weights(nb, Q, K, H, d, show, &w, &src, err);
    for (int64_t i = 0; !rc && i < show; i++) {
        /* Sources ascend, so a multi-edge's slots are adjacent: sum them. */
        int64_t best[TOP];
        double best_w[TOP];
        int n_best = 0;
        for (int64_t s = nb->edge_ptr[i]; s < nb->edge_ptr[i + 1];) {
            int64_t j = src[s];
            double total = 0;
            for (; s < nb->edge_ptr[i + 1] && src[s] == j; s++)
                total += w[s];
            int at = n_best < TOP ? n_best++ : TOP;
            while (at > 0 && best_w[at - 1] < total) {
                if (at < TOP)
                    best[at] = best[at - 1], best_w[at] = best_w[at - 1];
                at--;
            }
            if (at < TOP)
                best[at] = j, best_w[at] = total;
        }
        fprintf(f, "  '%s' attends ", labels->str[i]);
        if (n_best == 0)
            fputs("nothing (no in-edges)", f);
        for (int b = 0; b < n_best; b++)
            fprintf(f, "%s'%s': %.1f%%", b ? ", " : "", labels->str[best[b]], 100.0 * best_w[b]);
        fputc('\n', f);
    }
    if (!rc && nb->n_nodes > show)
        fprintf(f, "  ... and %lld more nodes\n", (long long)(nb->n_nodes - show));
    free(w);
    free(src);
    return rc;
}

int report_attention_csv(const char *path, const ag_nbhd_t *nb, const ag_labels_t *labels,
                         const float *Q, const float *K, int64_t H, int64_t d, ag_error_t *err)
{
    const int64_t E = nb->n_edges;
    ag_edge_msg_t *msgs = NULL;
    int64_t *slot = NULL;
    float *W = malloc((size_t)(E * H + 1) * sizeof *W);
    if (!W) {
        return ag_fail(err, AG_ENOMEM, "%s: out of memory for %lld weights", path,
                       (long long)(E * H));
    }
    int rc = ag_attention_weights(nb, Q, K, H, d, 0, nb->n_nodes, W, err);
    if (!rc)
        rc = ag_edge_order(nb, &msgs, &slot, err);
    FILE *f = rc ? NULL : fopen(path, "w");
    if (!rc && !f) {
        rc = ag_fail(err, AG_EIO, "%s: cannot write: %s", path, strerror(errno));
    }
    if (f) {
        fputs("src,dst,src_label,dst_label,head,weight\n", f);
        for (int64_t k = 0; k < E; k++)
            for (int64_t h = 0; h < H; h++) {
                fprintf(f, "%lld,%lld,", (long long)msgs[k].src, (long long)msgs[k].dst);
                csv_field(f, labels->str[msgs[k].src]);
                fputc(',', f);
                csv_field(f, labels->str[msgs[k].dst]);
                fprintf(f, ",%lld,%.9g\n", (long long)h, W[slot[k] * H + h]);
            }
        int bad = ferror(f);
        if (fclose(f) != 0 || bad) {
            rc = ag_fail(err, AG_EIO, "%s: write failed: %s", path, strerror(errno));
        }
    }
    free(W);
    free(msgs);
    free(slot);
    return rc;
}
