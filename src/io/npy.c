/*
 * .npy files (NumPy format versions 1.0, 2.0 and 3.0).
 * Reading accepts float, integer and bool dtypes of either byte order, in C or
 * Fortran order, and converts to what the caller wants (float32 matrices,
 * int64 indices). Writing produces little-endian float32 in C order.
 */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/io.h"

typedef struct {
    ag_dtype_t dtype;
    size_t itemsize;
    int swap;             /* stored in the other byte order than ours */
    int fortran;
    int ndim;
    int64_t shape[AG_NPY_MAX_DIMS];
    int64_t count;        /* product of shape */
} npy_header_t;

static int host_is_little(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

static const char *dtype_name(ag_dtype_t t)
{
    static const char *names[] = {"float32", "float64", "int8", "int16", "int32", "int64",
                                  "uint8", "uint16", "uint32", "uint64", "bool"};
    return names[t];
}

/* Parses a descr string such as '<f4' or '|u1'. */
static int parse_descr(npy_header_t *h, const char *descr, const char *path, ag_error_t *err)
{
    char order = descr[0];
    char kind = order ? descr[1] : 0;
    if (!strchr("<>|=", order) || !kind)
        return ag_fail(err, AG_EFORMAT, "%s: dtype '%s' is not understood; expected e.g. '<f4'",
                       path, descr);
    char *end;
    long size = strtol(descr + 2, &end, 10);
    if (*end != '\0')
        return ag_fail(err, AG_EFORMAT, "%s: dtype '%s' is not supported; expected a float, "
                       "integer or bool dtype", path, descr);
    static const struct { char kind; long size; ag_dtype_t t; } table[] = {
        {'f', 4, AG_DTYPE_F32}, {'f', 8, AG_DTYPE_F64},
        {'i', 1, AG_DTYPE_I8}, {'i', 2, AG_DTYPE_I16}, {'i', 4, AG_DTYPE_I32}, {'i', 8, AG_DTYPE_I64},
        {'u', 1, AG_DTYPE_U8}, {'u', 2, AG_DTYPE_U16}, {'u', 4, AG_DTYPE_U32}, {'u', 8, AG_DTYPE_U64},
        {'b', 1, AG_DTYPE_BOOL},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (table[i].kind == kind && table[i].size == size) {
            h->dtype = table[i].t;
            h->itemsize = (size_t)size;
            int little = order == '<' || (order == '=' && host_is_little());
            h->swap = size > 1 && order != '|' && little != host_is_little();
            return AG_OK;
        }
    }
    return ag_fail(err, AG_EFORMAT, "%s: dtype '%s' is not supported; expected float32, "
                   "float64, an integer or bool dtype", path, descr);
}

/* Finds 'key': in a header dict and returns the text after the colon. */
static const char *dict_value(const char *dict, const char *key)
{
    char quoted[32];
    snprintf(quoted, sizeof quoted, "'%s'", key);
    const char *p = strstr(dict, quoted);
    if (!p) {
        snprintf(quoted, sizeof quoted, "\"%s\"", key);
        p = strstr(dict, quoted);
    }
    if (!p)
        return NULL;
    p = strchr(p + strlen(quoted), ':');
    if (!p)
        return NULL;
    p++;
    while (isspace((unsigned char)*p))
        p++;
    return p;
}

static int parse_dict(npy_header_t *h, const char *dict, const char *path, ag_error_t *err)
{
    const char *v = dict_value(dict, "descr");
    if (!v || (*v != '\'' && *v != '"'))
        return ag_fail(err, AG_EFORMAT, "%s: .npy header has no 'descr' string", path);
    const char *close = strchr(v + 1, *v);
    if (!close || close - v > 16)
        return ag_fail(err, AG_EFORMAT, "%s: .npy header's 'descr' is malformed", path);
    char descr[20];
    memcpy(descr, v + 1, (size_t)(close - v - 1));
    descr[close - v - 1] = '\0';
    int rc = parse_descr(h, descr, path, err);
    if (rc)
        return rc;

    v = dict_value(dict, "fortran_order");
    if (v && strncmp(v, "True", 4) == 0)
        h->fortran = 1;
    else if (v && strncmp(v, "False", 5) == 0)
        h->fortran = 0;
    else
        return ag_fail(err, AG_EFORMAT, "%s: .npy header has no 'fortran_order' True/False",
                       path);

    v = dict_value(dict, "shape");
    if (!v || *v != '(')
        return ag_fail(err, AG_EFORMAT, "%s: .npy header has no 'shape' tuple", path);
    v++;
    h->ndim = 0;
    h->count = 1;
    for (;;) {
        while (isspace((unsigned char)*v) || *v == ',')
            v++;
        if (*v == ')')
            break;
        if (!isdigit((unsigned char)*v))
            return ag_fail(err, AG_EFORMAT, "%s: .npy header's shape is malformed", path);
        if (h->ndim == AG_NPY_MAX_DIMS)
            return ag_fail(err, AG_EFORMAT, "%s: array has more than %d dimensions", path,
                           AG_NPY_MAX_DIMS);
        errno = 0;
        char *end;
        long long dim = strtoll(v, &end, 10);
        if (errno || dim < 0 || (dim > 0 && h->count > INT64_MAX / 16 / dim))
            return ag_fail(err, AG_EFORMAT, "%s: shape dimension %.20s is too large", path, v);
        h->shape[h->ndim++] = dim;
        h->count *= dim;
        v = end;
    }
    return AG_OK;
}

/* Reads the header; leaves f positioned at the data. */
static int read_header(npy_header_t *h, FILE *f, const char *path, ag_error_t *err)
{
    unsigned char pre[10];
    if (fread(pre, 1, 8, f) != 8 || memcmp(pre, "\x93NUMPY", 6) != 0)
        return ag_fail(err, AG_EFORMAT, "%s: not a .npy file (no \\x93NUMPY magic)", path);
    size_t len;
    if (pre[6] == 1) {
        if (fread(pre + 8, 1, 2, f) != 2)
            return ag_fail(err, AG_EFORMAT, "%s: truncated .npy header", path);
        len = (size_t)pre[8] | (size_t)pre[9] << 8;
    } else if (pre[6] == 2 || pre[6] == 3) {
        unsigned char b[4];
        if (fread(b, 1, 4, f) != 4)
            return ag_fail(err, AG_EFORMAT, "%s: truncated .npy header", path);
        len = (size_t)b[0] | (size_t)b[1] << 8 | (size_t)b[2] << 16 | (size_t)b[3] << 24;
    } else {
        return ag_fail(err, AG_EFORMAT, "%s: .npy format version %d.%d is not supported", path,
                       pre[6], pre[7]);
    }
    if (len > (1u << 20))
        return ag_fail(err, AG_EFORMAT, "%s: .npy header of %zu bytes is implausible", path, len);
    char *dict = malloc(len + 1);
    if (!dict)
        return ag_fail(err, AG_ENOMEM, "%s: out of memory", path);
    int rc = AG_OK;
    if (fread(dict, 1, len, f) != len)
        rc = ag_fail(err, AG_EFORMAT, "%s: truncated .npy header", path);
    else {
        dict[len] = '\0';
        memset(h, 0, sizeof *h);
        rc = parse_dict(h, dict, path, err);
    }
    free(dict);
    return rc;
}

/* Reads the whole data block, byte-swapped to host order. */
static int read_data(unsigned char **out, const npy_header_t *h, FILE *f, const char *path,
                     ag_error_t *err)
{
    /* A header can declare any shape: check that a regular file holds the data
       before allocating for it. */
    struct stat st;
    const long at = ftell(f);
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && at >= 0) {
        const double need = (double)h->count * (double)h->itemsize;
        const int64_t have = (int64_t)st.st_size - at;
        if (need > (double)have)
            return ag_fail(err, AG_EFORMAT, "%s: truncated: the header declares %lld values "
                           "(%.4g bytes); the file holds %lld bytes of data (%lld values)", path,
                           (long long)h->count, need, (long long)have,
                           (long long)(have / (int64_t)h->itemsize));
    }
    unsigned char *buf = ag_alloc(h->count, h->itemsize, err, path);
    if (!buf)
        return ag_alloc_status();
    size_t want = (size_t)h->count * h->itemsize;
    size_t got = fread(buf, 1, want, f);
    if (got != want) {
        free(buf);
        return ag_fail(err, AG_EFORMAT, "%s: truncated: the shape needs %zu bytes of data, "
                       "the file has %zu", path, want, got);
    }
    if (h->swap) {
        for (size_t i = 0; i < want; i += h->itemsize)
            for (size_t a = i, b = i + h->itemsize - 1; a < b; a++, b--) {
                unsigned char t = buf[a];
                buf[a] = buf[b];
                buf[b] = t;
            }
    }
    *out = buf;
    return AG_OK;
}

/* The stream of path: standard input for "-" (read in one pass: the reader
   never seeks), the inflated bytes of an .npz member for "ARCHIVE.npz:NAME"
   (*bytes, freed by close_npy), else the file. NULL with *rc set on failure. */
static FILE *open_npy(const char *path, unsigned char **bytes, int *rc, ag_error_t *err)
{
    *bytes = NULL;
    *rc = AG_OK;
    if (strcmp(path, "-") == 0)
        return stdin;
    char *archive;
    const char *member;
    size_t len = 0;
    const int split = ag_i_npz_split(path, &archive, &member);
    if (split < 0)
        *rc = ag_fail(err, AG_ENOMEM, "%s: out of memory", path);
    else if (split)
        *rc = ag_i_npz_member(bytes, &len, archive, member, err);
    if (split > 0)
        free(archive);
    if (*rc)
        return NULL;
    FILE *f = split ? fmemopen(*bytes, len ? len : 1, "rb") : fopen(path, "rb");
    if (!f)
        *rc = ag_fail(err, AG_EIO, "%s: cannot open: %s", path, strerror(errno));
    return f;
}

static void close_npy(FILE *f, unsigned char *bytes)
{
    if (f && f != stdin)
        fclose(f);
    free(bytes);
}

static int open_and_read(npy_header_t *h, unsigned char **data, const char *path, ag_error_t *err)
{
    unsigned char *bytes;
    int rc;
    FILE *f = open_npy(path, &bytes, &rc, err);
    if (!rc)
        rc = read_header(h, f, path, err);
    if (!rc)
        rc = read_data(data, h, f, path, err);
    close_npy(f, bytes);
    return rc;
}

int ag_i_npy_shape(int *ndim, int64_t shape[AG_NPY_MAX_DIMS], const char *path, ag_error_t *err)
{
    unsigned char *bytes;
    npy_header_t h;
    int rc;
    FILE *f = open_npy(path, &bytes, &rc, err);
    if (!rc && !(rc = read_header(&h, f, path, err))) {
        *ndim = h.ndim;
        memcpy(shape, h.shape, sizeof h.shape);
    }
    close_npy(f, bytes);
    return rc;
}

/* Element i (in storage order) as a double; integers beyond 2^53 round. */
static double element(const unsigned char *p, ag_dtype_t t)
{
    switch (t) {
    case AG_DTYPE_F32: { float v; memcpy(&v, p, 4); return v; }
    case AG_DTYPE_F64: { double v; memcpy(&v, p, 8); return v; }
    case AG_DTYPE_I8: return (int8_t)p[0];
    case AG_DTYPE_I16: { int16_t v; memcpy(&v, p, 2); return v; }
    case AG_DTYPE_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case AG_DTYPE_I64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case AG_DTYPE_U8: case AG_DTYPE_BOOL: return p[0];
    case AG_DTYPE_U16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case AG_DTYPE_U32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case AG_DTYPE_U64: { uint64_t v; memcpy(&v, p, 8); return (double)v; }
    }
    return 0;
}

int ag_matrix_init(ag_matrix_t *m, int64_t rows, int64_t cols, ag_error_t *err)
{
    memset(m, 0, sizeof *m);
    if (rows < 0 || cols < 0 || (cols > 0 && rows > INT64_MAX / cols))
        return ag_fail(err, AG_EINVAL, "matrix of %lld x %lld is too large", (long long)rows,
                       (long long)cols);
    if (!(m->data = ag_calloc(rows * cols, sizeof(float), err, "matrix")))
        return ag_alloc_status();
    m->rows = rows;
    m->cols = cols;
    return AG_OK;
}

void ag_matrix_destroy(ag_matrix_t *m)
{
    if (m) {
        free(m->data);
        memset(m, 0, sizeof *m);
    }
}

static const char *describe_value(char *buf, size_t n, double x)
{
    if (isnan(x))
        return "NaN";
    if (isinf(x))
        return x > 0 ? "Inf" : "-Inf";
    snprintf(buf, n, "%g, outside float32's range", x);
    return buf;
}

/* Names element `at` (row-major) of an array of this rank for messages. */
static void describe_index(char *buf, size_t n, const ag_array_t *a, int64_t at)
{
    if (a->ndim == 2) {
        snprintf(buf, n, "row %lld, column %lld", (long long)(at / a->shape[1]),
                 (long long)(at % a->shape[1]));
        return;
    }
    int64_t idx[AG_NPY_MAX_DIMS];
    for (int k = a->ndim - 1; k >= 0; k--) {
        idx[k] = a->shape[k] ? at % a->shape[k] : 0;
        at = a->shape[k] ? at / a->shape[k] : 0;
    }
    int len = snprintf(buf, n, "element [");
    for (int k = 0; k < a->ndim && len < (int)n; k++)
        len += snprintf(buf + len, n - (size_t)len, "%s%lld", k ? ", " : "", (long long)idx[k]);
    if (len < (int)n)
        snprintf(buf + len, n - (size_t)len, "]");
}

/* Where element `at` of the row-major result lies in Fortran (first index
   fastest) storage. */
static int64_t fortran_offset(const npy_header_t *h, int64_t at)
{
    int64_t idx[AG_NPY_MAX_DIMS], src = 0;
    for (int k = h->ndim - 1; k >= 0; k--) {
        idx[k] = at % h->shape[k];
        at /= h->shape[k];
    }
    for (int k = h->ndim - 1; k >= 0; k--)
        src = src * h->shape[k] + idx[k];
    return src;
}

int ag_array_read_npy(ag_array_t *a, const char *path, ag_error_t *err)
{
    memset(a, 0, sizeof *a);
    npy_header_t h;
    unsigned char *raw = NULL;
    int rc = open_and_read(&h, &raw, path, err);
    if (rc)
        return rc;
    if (h.ndim < 1) {
        free(raw);
        return ag_fail(err, AG_EFORMAT, "%s: array is a scalar; expected an array", path);
    }
    a->ndim = h.ndim;
    memcpy(a->shape, h.shape, sizeof a->shape);
    if (!h.fortran && h.dtype == AG_DTYPE_F32) {
        a->data = (float *)raw;    /* already float32, row-major, host order */
    } else {
        a->data = ag_alloc(h.count, sizeof(float), err, path);
        if (!a->data) {
            free(raw);
            return ag_alloc_status();
        }
        for (int64_t at = 0; at < h.count; at++) {
            const int64_t src = h.fortran ? fortran_offset(&h, at) : at;
            double x = element(raw + (size_t)src * h.itemsize, h.dtype);
            if (!isfinite(x) || fabs(x) > FLT_MAX) {
                char where[96], what[64];
                describe_index(where, sizeof where, a, at);
                free(raw);
                ag_array_destroy(a);
                return ag_fail(err, AG_EINVAL, "%s: %s is %s; expected finite values", path,
                               where, describe_value(what, sizeof what, x));
            }
            a->data[at] = (float)x;
        }
        free(raw);
    }
    int64_t count = h.count;
    for (int64_t at = 0; at < count; at++)
        if (!isfinite(a->data[at])) {
            char where[96], what[64];
            describe_index(where, sizeof where, a, at);
            rc = ag_fail(err, AG_EINVAL, "%s: %s is %s; expected finite values", path, where,
                         describe_value(what, sizeof what, a->data[at]));
            ag_array_destroy(a);
            return rc;
        }
    return AG_OK;
}

void ag_array_destroy(ag_array_t *a)
{
    if (a) {
        free(a->data);
        memset(a, 0, sizeof *a);
    }
}

int ag_matrix_read_npy(ag_matrix_t *m, const char *path, ag_error_t *err)
{
    memset(m, 0, sizeof *m);
    ag_array_t a;
    int rc = ag_array_read_npy(&a, path, err);
    if (rc)
        return rc;
    if (a.ndim != 2) {
        rc = ag_fail(err, AG_EFORMAT, "%s: array has %d dimension%s; expected 2 (rows, columns)",
                     path, a.ndim, a.ndim == 1 ? "" : "s");
        ag_array_destroy(&a);
        return rc;
    }
    m->rows = a.shape[0];
    m->cols = a.shape[1];
    m->data = a.data;
    return AG_OK;
}

/* Does data [n] hold a NaN or an infinity? An exponent of all ones, tested on
   the bits: it vectorises (isfinite does not), and the attention entry points
   run it on every Q, K, V they are given. */
static int any_nonfinite(const float *data, int64_t n)
{
    const uint32_t exponent = 0x7f800000u;
    int bad = 0;
#pragma omp parallel for simd num_threads(ag_i_max_threads()) \
    if (n >= AG_PARALLEL_MIN_WORK * 16) schedule(static) reduction(| : bad)
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &data[i], sizeof bits);
        bad |= (bits & exponent) == exponent;
    }
    return bad;
}

int ag_check_finite(const char *what, const float *data, int64_t rows, int64_t cols,
                    ag_error_t *err)
{
    if (!data || !any_nonfinite(data, rows * cols))
        return AG_OK;
    for (int64_t i = 0; i < rows * cols; i++)
        if (!isfinite(data[i])) {
            char buf[64];
            return ag_fail(err, AG_EINVAL, "%s: row %lld, column %lld is %s; expected finite "
                           "values", what, (long long)(i / cols), (long long)(i % cols),
                           describe_value(buf, sizeof buf, data[i]));
        }
    return AG_OK;
}

/* count integers at raw (dtype h->dtype, host order) as int64 into v; element
   numbers in messages start at first. */
static int to_int64(int64_t *v, const unsigned char *raw, const npy_header_t *h, int64_t count,
                    int64_t first, const char *path, ag_error_t *err)
{
    for (int64_t i = 0; i < count; i++) {
        const unsigned char *p = raw + (size_t)i * h->itemsize;
        if (h->dtype == AG_DTYPE_I64) {
            memcpy(&v[i], p, 8);
        } else if (h->dtype == AG_DTYPE_U64) {
            uint64_t u;
            memcpy(&u, p, 8);
            if (u > INT64_MAX)
                return ag_fail(err, AG_EINVAL, "%s: element %lld is %llu, too large", path,
                               (long long)(first + i), (unsigned long long)u);
            v[i] = (int64_t)u;
        } else {
            v[i] = (int64_t)element(p, h->dtype);   /* exact below 2^53 */
        }
    }
    return AG_OK;
}

static int check_int_dtype(const npy_header_t *h, const char *path, ag_error_t *err)
{
    if (h->dtype == AG_DTYPE_F32 || h->dtype == AG_DTYPE_F64 || h->dtype == AG_DTYPE_BOOL)
        return ag_fail(err, AG_EFORMAT, "%s: dtype is %s; expected an integer dtype (int64)",
                       path, dtype_name(h->dtype));
    return AG_OK;
}

static int check_index_header(const npy_header_t *h, const char *path, ag_error_t *err)
{
    if (h->ndim != 1)
        return ag_fail(err, AG_EFORMAT, "%s: array has %d dimensions; expected 1", path, h->ndim);
    return check_int_dtype(h, path, err);
}

int ag_ints_read_npy(int64_t **values, int *ndim, int64_t shape[AG_NPY_MAX_DIMS],
                       const char *path, ag_error_t *err)
{
    *values = NULL;
    npy_header_t h;
    unsigned char *raw = NULL;
    int rc = open_and_read(&h, &raw, path, err);
    if (rc)
        return rc;
    if ((rc = check_int_dtype(&h, path, err))) {
        free(raw);
        return rc;
    }
    int64_t *v = ag_alloc(h.count ? h.count : 1, sizeof *v, err, path);
    rc = v ? to_int64(v, raw, &h, h.count, 0, path, err) : ag_alloc_status();
    /* row-major whatever the storage: a Fortran array read back in C order */
    int64_t *c = !rc && h.fortran ? ag_alloc(h.count ? h.count : 1, sizeof *c, err, path) : NULL;
    if (!rc && h.fortran && !c)
        rc = ag_alloc_status();
    for (int64_t at = 0; !rc && c && at < h.count; at++)
        c[at] = v[fortran_offset(&h, at)];
    free(raw);
    if (c)
        free(v), v = c;
    if (rc) {
        free(v);
        return rc;
    }
    *values = v;
    *ndim = h.ndim;
    memcpy(shape, h.shape, sizeof h.shape);
    return AG_OK;
}

int ag_index_read_npy(int64_t **values, int64_t *n, const char *path, ag_error_t *err)
{
    *values = NULL;
    *n = 0;
    npy_header_t h;
    unsigned char *raw = NULL;
    int rc = open_and_read(&h, &raw, path, err);
    if (rc)
        return rc;
    if ((rc = check_index_header(&h, path, err))) {
        free(raw);
        return rc;
    }
    if (h.dtype == AG_DTYPE_I64) {
        *values = (int64_t *)raw;
    } else {
        int64_t *v = ag_alloc(h.count, sizeof *v, err, path);
        if (!v) {
            free(raw);
            return ag_alloc_status();
        }
        rc = to_int64(v, raw, &h, h.count, 0, path, err);
        free(raw);
        if (rc) {
            free(v);
            return rc;
        }
        *values = v;
    }
    *n = h.count;
    return AG_OK;
}

int ag_i_index_read_npy_part(int64_t **values, int64_t *total, const char *path, int64_t first,
                             int64_t count, ag_error_t *err)
{
    *values = NULL;
    *total = 0;
    npy_header_t h;
    FILE *f = fopen(path, "rb");
    if (!f)
        return ag_fail(err, AG_EIO, "%s: cannot open: %s", path, strerror(errno));
    int rc = read_header(&h, f, path, err);
    if (!rc)
        rc = check_index_header(&h, path, err);
    if (!rc && (first < 0 || count < 0 || first > h.count - count))
        rc = ag_fail(err, AG_EINVAL, "%s has %lld entries; expected at least %lld", path,
                     (long long)h.count, (long long)(first + count));
    unsigned char *raw = rc ? NULL : ag_alloc(count ? count : 1, h.itemsize, err, path);
    int64_t *v = rc || !raw ? NULL : ag_alloc(count ? count : 1, sizeof *v, err, path);
    if (!rc && !v)
        rc = ag_alloc_status();
    if (!rc && fseek(f, (long)((size_t)first * h.itemsize), SEEK_CUR) != 0)
        rc = ag_fail(err, AG_EIO, "%s: cannot seek to entry %lld", path, (long long)first);
    if (!rc && fread(raw, h.itemsize, (size_t)count, f) != (size_t)count)
        rc = ag_fail(err, AG_EFORMAT, "%s: truncated: entries %lld..%lld are missing", path,
                     (long long)first, (long long)(first + count - 1));
    for (size_t i = 0; !rc && h.swap && i < (size_t)count * h.itemsize; i += h.itemsize)
        for (size_t a = i, b = i + h.itemsize - 1; a < b; a++, b--) {
            unsigned char t = raw[a];
            raw[a] = raw[b];
            raw[b] = t;
        }
    if (!rc)
        rc = to_int64(v, raw, &h, count, first, path, err);
    fclose(f);
    free(raw);
    if (rc) {
        free(v);
        return rc;
    }
    *values = v;
    *total = h.count;
    return AG_OK;
}

/* Writes data [shape] of `size`-byte elements of dtype descr (little-endian,
   "<f4" or "<i8") as a C-order .npy file, whatever the host's byte order. */
static int write_npy(const char *path, const char *descr, size_t size, const void *data,
                     int ndim, const int64_t *shape, ag_error_t *err)
{
    if (ndim < 1 || ndim > AG_NPY_MAX_DIMS)
        return ag_fail(err, AG_EINVAL, "%s: %d dimensions; expected 1 to %d", path, ndim,
                       AG_NPY_MAX_DIMS);
    char dims[128] = "";
    int64_t count = 1;
    for (int k = 0; k < ndim; k++) {
        snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%lld,%s",
                 (long long)shape[k], k + 1 < ndim ? " " : "");
        count *= shape[k];
    }
    if (ndim > 1)
        dims[strlen(dims) - 1] = '\0';   /* a 1-tuple keeps its comma: (n,) */
    char dict[192];
    int len = snprintf(dict, sizeof dict,
                       "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, dims);
    /* Pad with spaces so that the data starts at a multiple of 64 bytes. */
    int total = 10 + len + 1;
    int pad = (64 - total % 64) % 64;
    unsigned header_len = (unsigned)(len + pad + 1);

    FILE *f = fopen(path, "wb");
    if (!f)
        return ag_fail(err, AG_EIO, "%s: cannot create: %s", path, strerror(errno));
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                             (unsigned char)(header_len & 0xff), (unsigned char)(header_len >> 8)};
    fwrite(pre, 1, 10, f);
    fwrite(dict, 1, (size_t)len, f);
    for (int i = 0; i < pad; i++)
        fputc(' ', f);
    fputc('\n', f);
    if (host_is_little()) {
        fwrite(data, size, (size_t)count, f);
    } else {
        const unsigned char *bytes = data;
        for (int64_t i = 0; i < count; i++)
            for (size_t k = size; k-- > 0;)
                fputc(bytes[(size_t)i * size + k], f);
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return ag_fail(err, AG_EIO, "%s: write failed: %s", path, strerror(errno));
    return AG_OK;
}

int ag_npy_write_f32_nd(const char *path, const float *data, int ndim, const int64_t *shape,
                        ag_error_t *err)
{
    return write_npy(path, "<f4", sizeof *data, data, ndim, shape, err);
}

int ag_npy_write_i64(const char *path, const int64_t *values, int64_t n, ag_error_t *err)
{
    return write_npy(path, "<i8", sizeof *values, values, 1, &n, err);
}

int ag_npy_write_i64_nd(const char *path, const int64_t *values, int ndim, const int64_t *shape,
                        ag_error_t *err)
{
    return write_npy(path, "<i8", sizeof *values, values, ndim, shape, err);
}

int ag_npy_write_f32(const char *path, const float *data, int64_t rows, int64_t cols,
                     ag_error_t *err)
{
    const int64_t shape[2] = {rows, cols};
    return ag_npy_write_f32_nd(path, data, 2, shape, err);
}
