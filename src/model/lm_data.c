/*
 * A language model's data beside text: streams of token ids (nanoGPT's
 * train.bin and val.bin, uint16 little-endian as its prepare.py scripts write
 * them, or a 1-D integer .npy) and example sets (inputs and targets [n, T],
 * integer .npy arrays; a target of -100, PyTorch's ignore_index, is not
 * scored). Every id is checked against the vocabulary where it is read, and
 * an error names the file, the index and what was expected.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/base.h"

/* path ends in ext (".bin"), any case */
static int has_ext(const char *path, const char *ext)
{
    const size_t n = strlen(path), e = strlen(ext);
    return n > e && strcasecmp(path + n - e, ext) == 0;
}

/* "below the vocabulary of 512" or "below 1048576 (AG_LM_MAX_VOCAB)" */
static const char *bound_text(char *buf, size_t cap, int64_t vocab)
{
    if (vocab > 0)
        snprintf(buf, cap, "in 0..%lld (a vocabulary of %lld)", (long long)(vocab - 1),
                 (long long)vocab);
    else
        snprintf(buf, cap, "in 0..%d", AG_LM_MAX_VOCAB - 1);
    return buf;
}

static int check_vocab(int64_t vocab, const char *path, ag_error_t *err)
{
    if (vocab < 0 || vocab > AG_LM_MAX_VOCAB)
        return ag_fail(err, AG_EINVAL, "%s: a vocabulary of %lld; expected 1..%d (0: any)", path,
                       (long long)vocab, AG_LM_MAX_VOCAB);
    return AG_OK;
}

/* A nanoGPT .bin: uint16 little-endian ids, whatever the host's order. */
static int read_bin(int64_t **ids, int64_t *n, const char *path, ag_error_t *err)
{
    char *data;
    size_t len;
    int rc = ag_i_read_text(path, &data, &len, err);
    if (rc)
        return rc;
    if (len % 2) {
        free(data);
        return ag_fail(err, AG_EFORMAT, "%s: %zu bytes, an odd count; a .bin token file holds "
                       "uint16 ids, 2 bytes each (little-endian, as nanoGPT's prepare.py "
                       "writes them)", path, len);
    }
    *n = (int64_t)(len / 2);
    *ids = ag_alloc(*n ? *n : 1, sizeof **ids, err, path);
    if (!*ids) {
        free(data);
        return ag_alloc_status();
    }
    const unsigned char *b = (const unsigned char *)data;
    for (int64_t i = 0; i < *n; i++)
        (*ids)[i] = (int64_t)b[2 * i] | (int64_t)b[2 * i + 1] << 8;
    free(data);
    return AG_OK;
}

int ag_lm_tokens_read(int64_t **ids, int64_t *n, const char *path, int64_t vocab,
                      ag_error_t *err)
{
    *ids = NULL, *n = 0;
    int rc = check_vocab(vocab, path, err);
    if (rc)
        return rc;
    int64_t *v = NULL, count = 0;
    if (has_ext(path, ".bin")) {
        rc = read_bin(&v, &count, path, err);
    } else if (has_ext(path, ".npy")) {
        int ndim;
        int64_t shape[AG_NPY_MAX_DIMS];
        rc = ag_ints_read_npy(&v, &ndim, shape, path, err);
        if (!rc && ndim != 1)
            rc = ag_fail(err, AG_EFORMAT, "%s: %d dimensions; expected a 1-D stream of token ids",
                         path, ndim);
        count = !rc ? shape[0] : 0;
    } else {
        rc = ag_fail(err, AG_EINVAL, "%s: expected a .bin file (uint16 ids, nanoGPT's) or a "
                     ".npy stream of integer ids", path);
    }
    if (!rc && count == 0)
        rc = ag_fail(err, AG_EINVAL, "%s: no tokens", path);
    const int64_t most = vocab ? vocab : AG_LM_MAX_VOCAB;
    for (int64_t i = 0; !rc && i < count; i++)
        if (v[i] < 0 || v[i] >= most) {
            char bound[96];
            rc = ag_fail(err, AG_EINVAL, "%s: token %lld is %lld; expected an id %s", path,
                         (long long)i, (long long)v[i], bound_text(bound, sizeof bound, vocab));
        }
    if (rc) {
        free(v);
        return rc;
    }
    *ids = v, *n = count;
    return AG_OK;
}

/* A 2-D integer array of path: [*rows, *cols]. */
static int read_rows(int64_t **v, int64_t *rows, int64_t *cols, const char *path,
                     ag_error_t *err)
{
    int ndim;
    int64_t shape[AG_NPY_MAX_DIMS];
    int rc = ag_ints_read_npy(v, &ndim, shape, path, err);
    if (!rc && (ndim != 2 || shape[0] < 1 || shape[1] < 1))
        rc = ag_fail(err, AG_EFORMAT, "%s: %d dimension%s%s; expected [n, T] (an example a row, "
                     "n and T >= 1)", path, ndim, AG_PLURAL(ndim),
                     ndim == 2 ? " with an empty one" : "");
    if (rc) {
        free(*v), *v = NULL;
        return rc;
    }
    *rows = shape[0], *cols = shape[1];
    return AG_OK;
}

int ag_lm_examples_read(int64_t **inputs, int64_t **targets, int64_t *n, int64_t *T,
                        const char *inputs_path, const char *targets_path, int64_t vocab,
                        ag_error_t *err)
{
    *inputs = *targets = NULL, *n = *T = 0;
    int rc = check_vocab(vocab, inputs_path, err);
    int64_t *x = NULL, *y = NULL, rows = 0, cols = 0, trows = 0, tcols = 0;
    if (!rc)
        rc = read_rows(&x, &rows, &cols, inputs_path, err);
    if (!rc)
        rc = read_rows(&y, &trows, &tcols, targets_path, err);
    if (!rc && (trows != rows || tcols != cols))
        rc = ag_fail(err, AG_EINVAL, "%s is [%lld, %lld]; expected [%lld, %lld], the shape of "
                     "%s (a target a position)", targets_path, (long long)trows,
                     (long long)tcols, (long long)rows, (long long)cols, inputs_path);
    const int64_t most = vocab ? vocab : AG_LM_MAX_VOCAB;
    char bound[96];
    for (int64_t i = 0; !rc && i < rows * cols; i++)
        if (x[i] < 0 || x[i] >= most)
            rc = ag_fail(err, AG_EINVAL, "%s: row %lld, position %lld is %lld; expected a token "
                         "id %s", inputs_path, (long long)(i / cols), (long long)(i % cols),
                         (long long)x[i], bound_text(bound, sizeof bound, vocab));
    int64_t scored = 0;
    for (int64_t i = 0; !rc && i < rows * cols; i++) {
        if (y[i] == -100) {   /* PyTorch's ignore_index: not scored */
            y[i] = -1;
            continue;
        }
        if (y[i] < 0 || y[i] >= most)
            rc = ag_fail(err, AG_EINVAL, "%s: row %lld, position %lld is %lld; expected a token "
                         "id %s, or -100 (not scored)", targets_path, (long long)(i / cols),
                         (long long)(i % cols), (long long)y[i],
                         bound_text(bound, sizeof bound, vocab));
        scored++;
    }
    if (!rc && !scored)
        rc = ag_fail(err, AG_EINVAL, "%s: every target is -100; expected some scored", targets_path);
    if (rc) {
        free(x), free(y);
        return rc;
    }
    *inputs = x, *targets = y, *n = rows, *T = cols;
    return AG_OK;
}
