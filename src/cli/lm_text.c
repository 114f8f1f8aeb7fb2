/*
 * A language model's corpus: a text file read as UTF-8 characters (or bytes)
 * into token ids over the vocabulary of the characters it holds, in code
 * point order (nanoGPT's shakespeare_char: sorted(set(text))).
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cli/cli.h"
#include "cli/lm.h"

#define CODE_POINTS 0x110000

/* The code point at s[*at] (UTF-8; *at moves past it), or -1 when the bytes
   there are not one (overlong, surrogate, beyond U+10FFFF, cut short). */
static int32_t next_char(const unsigned char *s, int64_t n, int64_t *at)
{
    const unsigned char c = s[*at];
    const int len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3
                  : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (!len || *at + len > n)
        return -1;
    int32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (int k = 1; k < len; k++) {
        if ((s[*at + k] & 0xC0) != 0x80)
            return -1;
        cp = cp << 6 | (s[*at + k] & 0x3F);
    }
    static const int32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[len] || cp >= CODE_POINTS || (cp >= 0xD800 && cp < 0xE000))
        return -1;
    *at += len;
    return cp;
}

int lm_decode_text(const char *what, const char *hint, const char *text, int64_t n, int bytes,
                   int32_t *cps, int64_t *count, ag_error_t *err)
{
    *count = 0;
    for (int64_t at = 0; at < n;) {
        const int64_t here = at;
        const int32_t cp = bytes ? (unsigned char)text[at++]
                                 : next_char((const unsigned char *)text, n, &at);
        if (cp < 0)
            return ag_fail(err, AG_EINVAL, "%s: byte %lld (0x%02x) does not start a UTF-8 "
                           "character%s", what, (long long)here, (unsigned char)text[here],
                           hint);
        cps[(*count)++] = cp;
    }
    return AG_OK;
}

void corpus_free(corpus_t *c)
{
    free(c->ids), free(c->chars), free(c->inputs), free(c->targets);
    memset(c, 0, sizeof *c);
}

int corpus_read(corpus_t *c, const char *path, int bytes, ag_error_t *err)
{
    memset(c, 0, sizeof *c);
    char *text = NULL;
    size_t n = 0;
    int rc = read_all(path, &text, &n, (long)1 << 31, err);
    if (rc)
        return rc;
    if (n == 0) {
        free(text);
        return ag_fail(err, AG_EINVAL, "%s is empty; expected a text to learn from", path);
    }
    int32_t *cps = ag_alloc((int64_t)n, sizeof *cps, err, "text");
    int32_t *index = ag_alloc(CODE_POINTS, sizeof *index, err, "vocabulary");
    if (!cps || !index) {
        free(text), free(cps), free(index);
        return ag_alloc_status();
    }
    int64_t count = 0;
    rc = lm_decode_text(path, "; give --bytes to read the file as bytes", text, (int64_t)n,
                        bytes, cps, &count, err);
    free(text);
    for (int32_t k = 0; !rc && k < CODE_POINTS; k++)
        index[k] = -1;
    for (int64_t k = 0; !rc && k < count; k++)
        index[cps[k]] = 0;
    int64_t V = 0;
    for (int32_t k = 0; !rc && k < CODE_POINTS; k++)   /* code point order */
        if (index[k] == 0)
            index[k] = (int32_t)V++;
    c->ids = rc ? NULL : ag_alloc(count, sizeof *c->ids, err, "text");
    c->chars = rc ? NULL : ag_alloc(V, sizeof *c->chars, err, "vocabulary");
    if (!rc && (!c->ids || !c->chars))
        rc = ag_alloc_status();
    for (int32_t k = 0; !rc && k < CODE_POINTS; k++)
        if (index[k] >= 0)
            c->chars[index[k]] = k;
    for (int64_t k = 0; !rc && k < count; k++)
        c->ids[k] = index[cps[k]];
    free(cps), free(index);
    if (rc) {
        corpus_free(c);
        return rc;
    }
    c->n = count, c->V = V;
    c->split = (int64_t)(0.9 * (double)count);   /* nanoGPT's split */
    return AG_OK;
}
