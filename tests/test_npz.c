/*
 * .npz members read wherever a .npy is, and the npz graph format. The
 * archives are written here by a zip writer of the test's own (stored or
 * deflated by zlib, with and without numpy's zip64 headers), so the reader is
 * checked against the format, not against itself; damaged archives are
 * refused by name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "testutil.h"

static void put16(FILE *f, unsigned v) { fputc((int)(v & 255), f), fputc((int)(v >> 8 & 255), f); }
static void put32(FILE *f, uint32_t v) { put16(f, v & 0xFFFF), put16(f, v >> 16); }
static void put64(FILE *f, uint64_t v) { put32(f, (uint32_t)v), put32(f, (uint32_t)(v >> 32)); }

/* A .npy file's bytes: version 1.0, a header padded to 64 bytes. */
static size_t npy_bytes(unsigned char *out, const char *descr, const char *shape,
                        const void *data, size_t n)
{
    char dict[128];
    int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                       descr, shape);
    while ((10 + len + 1) % 64)
        dict[len++] = ' ';
    dict[len++] = '\n';
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (unsigned char)(len & 255), out[9] = (unsigned char)(len >> 8);
    memcpy(out + 10, dict, (size_t)len);
    memcpy(out + 10 + len, data, n);
    return 10 + (size_t)len + n;
}

typedef struct {
    const char *name;
    const unsigned char *data;
    size_t len;
} member_t;

/* Writes a zip of the members, deflated (method 8) or stored (0); zip64:
   the central directory's sizes as 0xFFFFFFFF with a zip64 extra field, as
   numpy's writer leaves them. corrupt: one byte of the first member's data
   flipped after its CRC is taken. */
static void write_zip(const char *path, const member_t *m, int n, int deflated, int zip64,
                      int corrupt)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    uint32_t offsets[8], crcs[8], csizes[8];
    for (int k = 0; k < n; k++) {
        unsigned char *packed = malloc(m[k].len + 64 + m[k].len / 2);
        size_t clen = m[k].len;
        if (deflated) {
            z_stream s;
            memset(&s, 0, sizeof s);
            ck_assert_int_eq(deflateInit2(&s, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY),
                             Z_OK);
            s.next_in = (unsigned char *)m[k].data, s.avail_in = (uInt)m[k].len;
            s.next_out = packed, s.avail_out = (uInt)(m[k].len + 64 + m[k].len / 2);
            ck_assert_int_eq(deflate(&s, Z_FINISH), Z_STREAM_END);
            clen = s.total_out;
            deflateEnd(&s);
        } else {
            memcpy(packed, m[k].data, m[k].len);
        }
        crcs[k] = (uint32_t)crc32(crc32(0, Z_NULL, 0), m[k].data, (uInt)m[k].len);
        if (corrupt && k == 0)
            packed[clen / 2] ^= 0x5a;
        csizes[k] = (uint32_t)clen;
        offsets[k] = (uint32_t)ftell(f);
        put32(f, 0x04034b50u), put16(f, 20), put16(f, 0), put16(f, deflated ? 8 : 0);
        put16(f, 0), put16(f, 0), put32(f, crcs[k]), put32(f, (uint32_t)clen);
        put32(f, (uint32_t)m[k].len), put16(f, (unsigned)strlen(m[k].name)), put16(f, 0);
        fputs(m[k].name, f);
        fwrite(packed, 1, clen, f);
        free(packed);
    }
    const uint32_t dir = (uint32_t)ftell(f);
    for (int k = 0; k < n; k++) {
        put32(f, 0x02014b50u), put16(f, 45), put16(f, 45), put16(f, 0);
        put16(f, deflated ? 8 : 0), put16(f, 0), put16(f, 0), put32(f, crcs[k]);
        put32(f, zip64 ? 0xFFFFFFFFu : csizes[k]);
        put32(f, zip64 ? 0xFFFFFFFFu : (uint32_t)m[k].len);
        put16(f, (unsigned)strlen(m[k].name)), put16(f, zip64 ? 20 : 0), put16(f, 0);
        put16(f, 0), put16(f, 0), put32(f, 0), put32(f, offsets[k]);
        fputs(m[k].name, f);
        if (zip64)   /* the two sizes that overflowed, uncompressed first */
            put16(f, 1), put16(f, 16), put64(f, m[k].len), put64(f, csizes[k]);
    }
    const uint32_t dir_len = (uint32_t)ftell(f) - dir;
    put32(f, 0x06054b50u), put16(f, 0), put16(f, 0), put16(f, (unsigned)n), put16(f, (unsigned)n);
    put32(f, dir_len), put32(f, dir), put16(f, 0);
    fclose(f);
}

/* An archive of a float32 [3, 4], a Fortran-free int64 [5, 2] and a bool [2, 3]. */
static void sample_archive(const char *path, int deflated, int zip64, int corrupt)
{
    float x[12];
    int64_t e[10] = {0, 1, 1, 2, 2, 3, 3, 4, 0, 4};
    unsigned char b[6] = {1, 0, 1, 0, 1, 1};
    for (int i = 0; i < 12; i++)
        x[i] = (float)i / 4 - 1;
    static unsigned char bx[256], be[256], bb[256];
    member_t m[3] = {{"x.npy", bx, npy_bytes(bx, "<f4", "(3, 4)", x, sizeof x)},
                     {"edges.npy", be, npy_bytes(be, "<i8", "(5, 2)", e, sizeof e)},
                     {"masks.npy", bb, npy_bytes(bb, "|b1", "(2, 3)", b, sizeof b)}};
    write_zip(path, m, 3, deflated, zip64, corrupt);
}

START_TEST(members_read_as_npy_files)
{
    /* _i: stored, deflated, deflated with zip64 headers */
    const char *path = tmp_path("a.npz");
    sample_archive(path, _i > 0, _i == 2, 0);
    char name[1024];
    ag_matrix_t m;
    ag_error_t err;
    snprintf(name, sizeof name, "%s:x", path);
    ck_assert_msg(ag_matrix_read_npy(&m, name, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(m.rows, 3);
    ck_assert_int_eq(m.cols, 4);
    for (int i = 0; i < 12; i++)
        ck_assert_float_eq(m.data[i], (float)i / 4 - 1);
    ag_matrix_destroy(&m);
    snprintf(name, sizeof name, "%s:masks.npy", path);   /* the name with its .npy too */
    ck_assert_int_eq(ag_matrix_read_npy(&m, name, &err), AG_OK);
    ck_assert_float_eq(m.data[2], 1);
    ck_assert_float_eq(m.data[3], 0);
    ag_matrix_destroy(&m);
    /* the npz graph format: edges [E, 2], undirected unless told */
    igraph_t g;
    ck_assert_msg(ag_graph_load(&g, path, NULL, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(igraph_vcount(&g), 5);
    ck_assert_int_eq(igraph_ecount(&g), 5);
    ck_assert(!igraph_is_directed(&g));
    igraph_integer_t from, to;
    igraph_edge(&g, 4, &from, &to);
    ck_assert_int_eq(from, 0);
    ck_assert_int_eq(to, 4);
    igraph_destroy(&g);
    ag_load_opts_t opts = {AG_FORMAT_AUTO, 0, AG_EDGES_DIRECTED};
    ck_assert_int_eq(ag_graph_load(&g, path, &opts, &err), AG_OK);
    ck_assert(igraph_is_directed(&g));
    igraph_destroy(&g);
}
END_TEST

START_TEST(damaged_archives_are_refused_by_name)
{
    const char *path = tmp_path("bad.npz");
    char name[1024];
    ag_matrix_t m;
    ag_error_t err;
    sample_archive(path, 1, 0, 1);
    snprintf(name, sizeof name, "%s:x", path);
    ck_assert_int_eq(ag_matrix_read_npy(&m, name, &err), AG_EFORMAT);
    ck_assert_msg(strstr(err.msg, "x.npy") && (strstr(err.msg, "CRC-32") ||
                  strstr(err.msg, "does not inflate")), "%s", err.msg);
    sample_archive(path, 0, 1, 1);   /* stored: the CRC alone can tell */
    ck_assert_fails_with(ag_matrix_read_npy(&m, name, &err), err, AG_EFORMAT,
                         "member x.npy fails its CRC-32 check");
    sample_archive(path, 1, 0, 0);
    snprintf(name, sizeof name, "%s:y", path);
    ck_assert_fails_with(ag_matrix_read_npy(&m, name, &err), err, AG_EINVAL,
                         "has no member 'y'; it has x, edges, masks");
    /* not a zip, and a zip cut short */
    write_text(tmp_path("text.npz"), "hello, this is no archive at all\n");
    snprintf(name, sizeof name, "%s:x", tmp_path("text.npz"));
    ck_assert_fails_with(ag_matrix_read_npy(&m, name, &err), err, AG_EFORMAT,
                         "not a .npz archive");
    char *whole = read_text(path);
    FILE *f = fopen(tmp_path("cut.npz"), "wb");
    fwrite(whole, 1, 100, f);
    fclose(f);
    free(whole);
    snprintf(name, sizeof name, "%s:x", tmp_path("cut.npz"));
    ck_assert_int_eq(ag_matrix_read_npy(&m, name, &err), AG_EFORMAT);
    /* an edge naming a node beyond the per-node arrays */
    static unsigned char be[256], bl[256];
    int64_t e[4] = {0, 1, 7, 1}, labels[3] = {0, 1, 0};
    member_t mm[2] = {{"edges.npy", be, npy_bytes(be, "<i8", "(2, 2)", e, sizeof e)},
                      {"node_labels.npy", bl, npy_bytes(bl, "<i8", "(3,)", labels, sizeof labels)}};
    write_zip(path, mm, 2, 0, 0, 0);
    igraph_t g;
    ck_assert_fails_with(ag_graph_load(&g, path, NULL, &err), err, AG_EFORMAT,
                         "edge 1 names node 7, but the archive's per-node arrays have 3 rows");
    write_zip(path, mm + 1, 1, 0, 0, 0);
    ck_assert_fails_with(ag_graph_load(&g, path, NULL, &err), err, AG_EFORMAT,
                         "no edges; expected a member 'edges' [E, 2] or 'edge_index' [2, E] "
                         "(it has node_labels)");
}
END_TEST

Suite *npz_suite(void)
{
    Suite *s = suite_create("npz");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, members_read_as_npy_files, 0, 3);
    tcase_add_test(tc, damaged_archives_are_refused_by_name);
    suite_add_tcase(s, tc);
    return s;
}
