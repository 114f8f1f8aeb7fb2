/*
 * A language model's folder, as `lm train --save` and ag_lm_model_save write
 * it and `lm sample`, ag_lm_model_load and Python's attngraph.lm read it:
 * model.txt (the GPT's keys: the shape, the vocabulary's kind and the pattern
 * it trained under), vocab.npy (the characters' code points, or bytes),
 * wte.npy, wpe.npy, lnf_weight.npy (lnf_bias.npy) and one folder a block,
 * round-L/, with its arrays by their names (ag_layer_array_info). Folders of
 * 0.2, with lm.txt in the place of model.txt, load too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"
#include "model/model.h"

/* One array of a model's folder: where (round 0: the top) and its shape. */
typedef struct {
    float *data;
    const char *name;     /* without ".npy" */
    int64_t round;        /* 1..L: in round-<round>/ */
    int ndim;
    int64_t shape[3];
} lm_array_t;

/* Every array of m, in one order for save and load; returns the count. */
static int model_arrays(const ag_lm_t *m, lm_array_t *out)
{
    int k = 0;
    out[k++] = (lm_array_t){m->wte, "wte", 0, 2, {m->V, m->D}};
    if (m->wpe)   /* learnt positions */
        out[k++] = (lm_array_t){m->wpe, "wpe", 0, 2, {m->T, m->D}};
    out[k++] = (lm_array_t){m->lnf_weight, "lnf_weight", 0, 1, {m->D}};
    if (m->lnf_bias)
        out[k++] = (lm_array_t){m->lnf_bias, "lnf_bias", 0, 1, {m->D}};
    for (int64_t l = 0; l < m->L; l++) {
        ag_weights_t *w = &m->layers[l];
        for (int a = 0; a < AG_LAYER_ARRAYS; a++)
            if (*ag_layer_array(w, a)) {
                out[k] = (lm_array_t){*ag_layer_array(w, a), ag_layer_array_info(a)->name,
                                      l + 1, 0, {0}};
                out[k].ndim = ag_layer_array_shape(w, a, out[k].shape);
                k++;
            }
    }
    return k;
}

/* x's file in the folder: "wte.npy" or "round-2/wq.npy". */
static void array_file(char *buf, size_t cap, const lm_array_t *x)
{
    if (x->round)
        snprintf(buf, cap, "round-%lld/%s.npy", (long long)x->round, x->name);
    else
        snprintf(buf, cap, "%s.npy", x->name);
}

static int max_arrays(const ag_lm_t *m)
{
    return 4 + (int)m->L * AG_LAYER_ARRAYS;
}

/* The folder's text: the GPT's keys, one a line. */
static void model_text(char *buf, size_t cap, const ag_lm_model_t *lm)
{
    const ag_lm_t *m = &lm->m;
    const size_t used = (size_t)snprintf(
        buf, cap, "# attngraph language model\nvocab %lld %s\nblock %lld\nlayers %lld\n"
        "heads %lld\ndim %lld\nbias %s\npattern %s\n", (long long)m->V,
        lm->ids ? "ids" : lm->bytes ? "bytes" : "utf-8", (long long)m->T, (long long)m->L,
        (long long)m->H, (long long)m->D, m->bias ? "yes" : "no", lm->pattern);
    size_t more = 0;
    if (m->positions != AG_LM_POS_LEARNT && used < cap)   /* learnt: as 0.2 wrote it */
        more = (size_t)snprintf(buf + used, cap - used, "positions %s\n",
                                ag_lm_positions_name(m->positions));
    if (!ag_lm_has_mlp(m) && used + more < cap)   /* with one: as before */
        snprintf(buf + used + more, cap - used - more, "mlp no\n");
}

int ag_i_lm_model_save(const ag_lm_model_t *lm, const char *dir, const char *option,
                       ag_error_t *err)
{
    if (!lm || !lm->m.wte || (!lm->chars && !lm->ids) || !dir)
        return ag_fail(err, AG_EINVAL, "ag_lm_model_save: %s is NULL",
                       !dir ? "the folder" : !lm || !lm->m.wte ? "the model"
                       : "the vocabulary (chars; or ids set)");
    int rc = ag_i_fail_prefix(ag_i_lm_pattern_check(lm->pattern, lm->m.L, err), err,
                              "ag_lm_model_save");
    if (rc)
        return rc;
    const ag_lm_t *m = &lm->m;
    for (int64_t l = 1; l < m->L; l++)   /* model.txt says mlp yes or no for all */
        if (!m->layers[l].w1 != !m->layers[0].w1)
            return ag_fail(err, AG_EINVAL, "ag_lm_model_save: block %lld %s a feed-forward "
                           "sublayer and block 1 %s; expected all blocks with one or none "
                           "(mlp yes|no)", (long long)(l + 1), m->layers[l].w1 ? "has" : "has no",
                           m->layers[0].w1 ? "has" : "has none");
    const int cap = 2 + max_arrays(m);
    ag_i_folder_item_t *items = ag_calloc(cap, sizeof *items, err, "the model's files");
    lm_array_t *arrays = ag_calloc(cap, sizeof *arrays, err, "the model's files");
    char (*names)[96] = ag_calloc(cap, sizeof *names, err, "the model's files");
    int64_t *vocab = ag_alloc(m->V, sizeof *vocab, err, "the vocabulary");
    char text[AG_LM_PATTERN_MAX + 256];
    rc = items && arrays && names && vocab ? AG_OK : ag_alloc_status();
    for (int64_t v = 0; !rc && !lm->ids && v < m->V; v++)
        vocab[v] = lm->chars[v];
    if (!rc) {
        model_text(text, sizeof text, lm);
        int k = 0;
        items[k++] = (ag_i_folder_item_t){.name = "model.txt", .text = text};
        if (!lm->ids)   /* token ids are their own vocabulary */
            items[k++] = (ag_i_folder_item_t){.name = "vocab.npy", .i64 = vocab, .ndim = 1,
                                              .shape = {m->V}};
        const int n = model_arrays(m, arrays);
        for (int a = 0; a < n; a++, k++) {
            const lm_array_t *x = &arrays[a];
            array_file(names[a], sizeof names[a], x);
            items[k] = (ag_i_folder_item_t){.name = names[a], .f32 = x->data, .ndim = x->ndim};
            memcpy(items[k].shape, x->shape, sizeof x->shape);
        }
        rc = ag_i_folder_write(dir, option, items, k, err);
    }
    free(items), free(arrays), free(names), free(vocab);
    return rc;
}

int ag_lm_model_save(const ag_lm_model_t *lm, const char *dir, ag_error_t *err)
{
    int rc = dir ? ag_i_folder_check(dir, NULL, err) : AG_OK;
    return rc ? rc : ag_i_lm_model_save(lm, dir, NULL, err);
}

int ag_i_lm_model_save_check(const char *dir, int64_t L, int64_t H, int bias, int mlp,
                             ag_lm_positions_t positions, int ids, ag_error_t *err)
{
    ag_lm_t m;   /* the shapes do not matter here, only which files there will be */
    int rc = ag_lm_init(&m, 1, 1, 2 * H, L, H, bias, 1, err);   /* (rotary: even heads) */
    if (!rc && !mlp)
        rc = ag_lm_set_mlp(&m, 0, err);
    if (!rc && positions)
        rc = ag_lm_set_positions(&m, positions, err);
    lm_array_t *arrays = rc ? NULL : ag_calloc(max_arrays(&m), sizeof *arrays, err, "--save");
    if (!rc && !arrays)
        rc = ag_alloc_status();
    const int n = rc ? 0 : model_arrays(&m, arrays);
    static const char *const top[] = {"vocab.npy", "model.txt"};
    for (int a = ids ? -1 : -2; !rc && a < n; a++) {   /* (ids: no vocab.npy) */
        char file[96], path[4096];
        struct stat st;
        if (a < 0)
            snprintf(file, sizeof file, "%s", top[a + 2]);
        else
            array_file(file, sizeof file, &arrays[a]);
        snprintf(path, sizeof path, "%s/%s", dir, file);
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
            rc = ag_fail(err, AG_EIO, "--save %s: %s is a folder, where the model's file "
                         "goes; expected a file or nothing there", dir, path);
    }
    free(arrays);
    ag_lm_destroy(&m);
    return rc;
}

void ag_lm_model_destroy(ag_lm_model_t *lm)
{
    if (!lm)
        return;
    ag_lm_destroy(&lm->m);
    free(lm->chars);
    memset(lm, 0, sizeof *lm);
}

/* The text's keys into the sizes and lm's kind and pattern; path names the file. */
static int read_header(ag_lm_model_t *lm, int64_t size[6], int *bias,
                       ag_lm_positions_t *positions, int *mlp, const char *path,
                       ag_error_t *err)
{
    static const char *keys[] = {"vocab", "block", "layers", "heads", "dim", "bias",
                                 "pattern", "positions", "mlp"};
    char *text = NULL;
    size_t len;
    int rc = ag_i_read_text(path, &text, &len, err);
    if (rc)
        return rc;
    if (strlen(text) != len)
        rc = ag_fail(err, AG_EFORMAT, "%s: a NUL byte at offset %zu; expected a text", path,
                     strlen(text));
    int seen[9] = {0}, line = 0, pattern_line = 0;
    snprintf(lm->pattern, sizeof lm->pattern, "causal");   /* saves before the key */
    *positions = AG_LM_POS_LEARNT;   /* saves before the key */
    *mlp = 1;
    for (char *s = text, *end; !rc && s && *s; s = end) {
        end = strchr(s, '\n');
        if (end)
            *end++ = '\0';
        line++;
        s[strcspn(s, "\r")] = '\0';
        while (*s == ' ' || *s == '\t')
            s++;
        if (*s == '#' || *s == '\0')
            continue;
        char key[32], value[AG_LM_PATTERN_MAX], kind[32] = "", rest[2];
        long long x = 0;
        int k = -1;
        if (sscanf(s, "%31s %1023[^\n]", key, value) == 2)
            for (k = 8; k >= 0 && strcmp(key, keys[k]); k--)
                ;
        int ok = k >= 0;
        if (ok && k == 6) {   /* checked once the layers are known, named at its line */
            const char *rest_of_line = s + strcspn(s, " \t");
            rest_of_line += strspn(rest_of_line, " \t");
            if (strlen(rest_of_line) >= sizeof lm->pattern) {
                rc = ag_fail(err, AG_ELIMIT, "%s:%d: a pattern of %zu characters; expected up "
                             "to %d", path, line, strlen(rest_of_line), AG_LM_PATTERN_MAX - 1);
                break;
            }
            snprintf(lm->pattern, sizeof lm->pattern, "%s", value);
            pattern_line = line;
        }
        else if (ok && k == 7)
            ok = ag_lm_positions_parse(value, positions) == AG_OK;
        else if (ok && k == 8)
            ok = (*mlp = !strcmp(value, "yes")) || !strcmp(value, "no");
        else if (ok && k == 5)
            ok = (*bias = !strcmp(value, "yes")) || !strcmp(value, "no");
        else if (ok && k == 0)   /* nothing after what is read: %1s finds it */
            ok = sscanf(value, "%lld %31s %1s", &x, kind, rest) == 2 &&
                 ((lm->bytes = !strcmp(kind, "bytes")) || (lm->ids = !strcmp(kind, "ids")) ||
                  !strcmp(kind, "utf-8"));
        else if (ok)
            ok = sscanf(value, "%lld %1s", &x, rest) == 1;
        if (ok && k < 5 && x < 1)
            ok = 0;
        if (!ok)
            rc = ag_fail(err, AG_EINVAL, "%s:%d: '%s'; expected one of vocab N utf-8|bytes|ids, "
                         "block T, layers L, heads H, dim D (each >= 1), bias yes|no, "
                         "pattern SPEC, positions learnt|rope|none, mlp yes|no", path, line, s);
        else if (k < 5)
            size[k] = x;
        if (ok)
            seen[k] = 1;
    }
    for (int k = 0; !rc && k < 6; k++)
        if (!seen[k])
            rc = ag_fail(err, AG_EINVAL, "%s has no '%s' line; expected the file `lm train "
                         "--save` writes", path, keys[k]);
    if (!rc && pattern_line)
        rc = ag_i_fail_prefix(ag_i_lm_pattern_check(lm->pattern, size[2], err), err, "%s:%d",
                              path, pattern_line);
    free(text);
    return rc;
}

/* vocab.npy: V code points, ascending, each a character of the kind. */
static int read_vocab(ag_lm_model_t *lm, int64_t V, const char *dir, const char *header,
                      ag_error_t *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab.npy", dir);
    int64_t *v = NULL, n = 0;
    int rc = ag_index_read_npy(&v, &n, path, err);
    if (rc)
        return rc;
    if (n != V)
        rc = ag_fail(err, AG_EINVAL, "%s holds %lld characters; %s says vocab %lld",
                     path, (long long)n, header, (long long)V);
    const int64_t top = lm->bytes ? 256 : 0x110000;
    for (int64_t k = 0; !rc && k < n; k++)
        if (v[k] < 0 || v[k] >= top || (v[k] >= 0xD800 && v[k] < 0xE000 && !lm->bytes) ||
            (k && v[k] <= v[k - 1]))
            rc = ag_fail(err, AG_EINVAL, "%s: entry %lld is %lld; expected ascending %s",
                         path, (long long)k, (long long)v[k],
                         lm->bytes ? "bytes (0..255)" : "Unicode code points (below "
                         "0x110000, no surrogates 0xD800..0xDFFF)");
    lm->chars = rc ? NULL : ag_alloc(n, sizeof *lm->chars, err, "vocabulary");
    if (!rc && !lm->chars)
        rc = ag_alloc_status();
    for (int64_t k = 0; !rc && k < n; k++)
        lm->chars[k] = (int32_t)v[k];
    free(v);
    return rc;
}

/* The folder's text: model.txt, or 0.2's lm.txt where there is no model.txt. */
static void header_path(char *buf, size_t cap, const char *dir)
{
    struct stat st;
    snprintf(buf, cap, "%s/model.txt", dir);
    if (stat(buf, &st) != 0) {
        snprintf(buf, cap, "%s/lm.txt", dir);
        if (stat(buf, &st) != 0)   /* neither: the message names today's */
            snprintf(buf, cap, "%s/model.txt", dir);
    }
}

int ag_lm_model_load(ag_lm_model_t *lm, const char *dir, ag_error_t *err)
{
    if (!lm || !dir)
        return ag_fail(err, AG_EINVAL, "ag_lm_model_load: %s is NULL",
                       !dir ? "the folder" : "the model");
    memset(lm, 0, sizeof *lm);
    int64_t size[6] = {0};
    int bias = 0, mlp = 1;
    ag_lm_positions_t positions;
    char header[4096];
    header_path(header, sizeof header, dir);
    int rc = read_header(lm, size, &bias, &positions, &mlp, header, err);
    if (!rc && !lm->ids)
        rc = read_vocab(lm, size[0], dir, header, err);
    if (!rc)   /* the shapes, then each array into place */
        rc = ag_i_fail_prefix(ag_lm_init(&lm->m, size[0], size[1], size[4], size[2], size[3],
                                         bias, 1, err), err, "%s", header);
    if (!rc)
        rc = ag_i_fail_prefix(ag_lm_set_positions(&lm->m, positions, err), err, "%s", header);
    if (!rc && !mlp)
        rc = ag_i_fail_prefix(ag_lm_set_mlp(&lm->m, 0, err), err, "%s", header);
    lm_array_t *arrays = rc ? NULL : ag_calloc(max_arrays(&lm->m), sizeof *arrays, err,
                                               "model");
    if (!rc && !arrays)
        rc = ag_alloc_status();
    const int n = rc ? 0 : model_arrays(&lm->m, arrays);
    for (int a = 0; !rc && a < n; a++) {
        const lm_array_t *x = &arrays[a];
        char sub[4096];
        snprintf(sub, sizeof sub, x->round ? "%s/round-%lld" : "%s", dir, (long long)x->round);
        float *read = NULL;
        if (!(rc = ag_i_weights_load_array(&read, sub, x->name, x->ndim, x->shape, 0, err))) {
            int64_t count = 1;
            for (int d = 0; d < x->ndim; d++)
                count *= x->shape[d];
            memcpy(x->data, read, (size_t)count * sizeof *read);
        }
        free(read);
    }
    free(arrays);
    if (rc)
        ag_lm_model_destroy(lm);
    return rc;
}
