/* .npy reading and writing: round trips, conversions and every refusal. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

START_TEST(roundtrip_f32)
{
    float x[12];
    fill_uniform(x, 12, 1, 100.0f);
    const char *p = tmp_path("rt.npy");
    ag_error_t err;
    ck_assert_int_eq(ag_npy_write_f32(p, x, 3, 4, &err), AG_OK);
    ag_matrix_t m;
    ck_assert_int_eq(ag_matrix_read_npy(&m, p, &err), AG_OK);
    ck_assert_int_eq(m.rows, 3);
    ck_assert_int_eq(m.cols, 4);
    ck_assert_mem_eq(m.data, x, sizeof x);
    ag_matrix_destroy(&m);
    /* the header is padded so the data starts at a multiple of 64 */
    unsigned char head[256];
    FILE *f = fopen(p, "rb");
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    const unsigned char *nl = memchr(head, '\n', n);
    ck_assert_ptr_nonnull(nl);
    ck_assert_int_eq((nl - head + 1) % 64, 0);
    ck_assert_int_eq(n, (size_t)(nl - head + 1) + sizeof x);
}
END_TEST

START_TEST(roundtrip_any_rank)
{
    float x[24];
    fill_uniform(x, 24, 5, 3.0f);
    ag_error_t err;
    const int64_t shapes[3][3] = {{24}, {4, 6}, {2, 3, 4}};
    for (int ndim = 1; ndim <= 3; ndim++) {
        const char *p = tmp_path("nd.npy");
        ck_assert_int_eq(ag_npy_write_f32_nd(p, x, ndim, shapes[ndim - 1], &err), AG_OK);
        ag_array_t a;
        ck_assert_int_eq(ag_array_read_npy(&a, p, &err), AG_OK);
        ck_assert_int_eq(a.ndim, ndim);
        for (int k = 0; k < ndim; k++)
            ck_assert_int_eq(a.shape[k], shapes[ndim - 1][k]);
        ck_assert_mem_eq(a.data, x, sizeof x);
        ag_array_destroy(&a);
    }
    ck_assert_int_eq(ag_npy_write_f32_nd(tmp_path("bad.npy"), x, 5, shapes[0], &err), AG_EINVAL);
}
END_TEST

START_TEST(roundtrip_i64)
{
    const int64_t v[5] = {0, -1, (int64_t)1 << 40, INT64_MIN, 258};
    const char *p = tmp_path("i8.npy");
    ag_error_t err;
    ck_assert_int_eq(ag_npy_write_i64(p, v, 5, &err), AG_OK);
    int64_t *back, n;
    ck_assert_int_eq(ag_index_read_npy(&back, &n, p, &err), AG_OK);
    ck_assert_int_eq(n, 5);
    ck_assert_mem_eq(back, v, sizeof v);
    free(back);
    /* numpy's '<i8' whatever the host: 258 is the bytes 02 01 00 ... */
    unsigned char raw[256];
    FILE *f = fopen(p, "rb");
    const size_t got = fread(raw, 1, sizeof raw, f);
    fclose(f);
    const unsigned char *nl = memchr(raw, '\n', got);
    ck_assert_ptr_nonnull(nl);
    ck_assert_ptr_nonnull(strstr((const char *)raw + 10, "'descr': '<i8'"));
    ck_assert_ptr_nonnull(strstr((const char *)raw + 10, "'shape': (5,)"));
    const size_t data = (size_t)(nl - raw + 1);
    ck_assert_int_eq(data % 64, 0);
    ck_assert_int_eq(got, data + sizeof v);
    const unsigned char last[8] = {2, 1, 0, 0, 0, 0, 0, 0};
    ck_assert_mem_eq(raw + data + 4 * 8, last, 8);
    ck_assert_int_eq(ag_npy_write_i64(tmp_path("no/such/dir.npy"), v, 5, &err), AG_EIO);
}
END_TEST

START_TEST(reads_f64_and_fortran_order)
{
    const double x[6] = {1.5, -2.0, 3.25, 4.0, 1e30, -6.5};   /* Fortran order of [2, 3] */
    const char *p = tmp_path("f64.npy");
    write_npy_raw(p, "<f8", 1, "(2, 3)", x, sizeof x);
    ag_matrix_t m;
    ag_error_t err;
    ck_assert_int_eq(ag_matrix_read_npy(&m, p, &err), AG_OK);
    /* element (r, c) lives at x[c*2 + r] */
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 3; c++)
            ck_assert_float_eq(m.data[r * 3 + c], (float)x[c * 2 + r]);
    ag_matrix_destroy(&m);
}
END_TEST

START_TEST(reads_integers_and_big_endian)
{
    const int16_t v[4] = {-3, 7, 300, -32768};
    const char *p = tmp_path("i2.npy");
    write_npy_raw(p, "<i2", 0, "(2, 2)", v, sizeof v);
    ag_matrix_t m;
    ag_error_t err;
    ck_assert_int_eq(ag_matrix_read_npy(&m, p, &err), AG_OK);
    for (int i = 0; i < 4; i++)
        ck_assert_float_eq(m.data[i], (float)v[i]);
    ag_matrix_destroy(&m);

    /* big-endian float32: bytes of 1.0f are 3f 80 00 00 */
    const unsigned char be[8] = {0x3f, 0x80, 0, 0, 0xc0, 0x20, 0, 0};   /* 1.0, -2.5 */
    p = tmp_path("be.npy");
    write_npy_raw(p, ">f4", 0, "(1, 2)", be, sizeof be);
    ck_assert_int_eq(ag_matrix_read_npy(&m, p, &err), AG_OK);
    ck_assert_float_eq(m.data[0], 1.0f);
    ck_assert_float_eq(m.data[1], -2.5f);
    ag_matrix_destroy(&m);
}
END_TEST

START_TEST(reads_index_arrays)
{
    const int32_t v[5] = {0, 2, 5, 5, 9};
    const char *p = tmp_path("idx.npy");
    write_npy_raw(p, "<i4", 0, "(5,)", v, sizeof v);
    int64_t *out, n;
    ag_error_t err;
    ck_assert_int_eq(ag_index_read_npy(&out, &n, p, &err), AG_OK);
    ck_assert_int_eq(n, 5);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(out[i], v[i]);
    free(out);
    const float f[2] = {1, 2};
    write_npy_raw(p, "<f4", 0, "(2,)", f, sizeof f);
    ck_assert_fails_with(ag_index_read_npy(&out, &n, p, &err), err, AG_EFORMAT, "integer");
}
END_TEST

/* Each refused file: what it holds and the words the message must contain. */
START_TEST(refuses_what_it_cannot_read)
{
    const float x[8] = {0};
    ag_matrix_t m;
    ag_error_t err;
    const char *p = tmp_path("bad.npy");

    write_npy_raw(p, "<f4", 0, "(2, 2, 2)", x, sizeof x);
    ck_assert_fails_with(ag_matrix_read_npy(&m, p, &err), err, AG_EFORMAT, "3 dimensions");
    write_npy_raw(p, "<f4", 0, "(8,)", x, sizeof x);
    ck_assert_fails_with(ag_matrix_read_npy(&m, p, &err), err, AG_EFORMAT, "expected 2");
    write_npy_raw(p, "<c8", 0, "(2, 2)", x, sizeof x);
    ck_assert_fails_with(ag_matrix_read_npy(&m, p, &err), err, AG_EFORMAT, "'<c8'");
    write_npy_raw(p, "|O", 0, "(2, 2)", x, sizeof x);
    ck_assert_fails_with(ag_matrix_read_npy(&m, p, &err), err, AG_EFORMAT, "'|O'");
    write_npy_raw(p, "<f4", 0, "(4, 4)", x, sizeof x);    /* 64 bytes needed, 32 present */
    ck_assert_fails_with(ag_matrix_read_npy(&m, p, &err), err, AG_EFORMAT, "truncated");
    write_text(p, "not a numpy file at all");
    ck_assert_fails_with(ag_matrix_read_npy(&m, p, &err), err, AG_EFORMAT, "not a .npy");
    write_text(p, "");
    ck_assert_fails_with(ag_matrix_read_npy(&m, p, &err), err, AG_EFORMAT, "not a .npy");
    ck_assert_fails_with(ag_matrix_read_npy(&m, tmp_path("missing.npy"), &err), err, AG_EIO,
                         "missing.npy");
}
END_TEST

START_TEST(refuses_non_finite_naming_row_and_column)
{
    float x[6] = {0, 1, 2, 3, 4, 5};
    ag_matrix_t m;
    ag_error_t err;
    const char *p = tmp_path("nan.npy");
    x[4] = NAN;                                     /* row 1, column 1 of [2, 3] */
    ag_npy_write_f32(p, x, 2, 3, &err);
    ck_assert_fails_with(ag_matrix_read_npy(&m, p, &err), err, AG_EINVAL, "row 1, column 1 is NaN");
    x[4] = 0, x[2] = -INFINITY;
    ag_npy_write_f32(p, x, 2, 3, &err);
    ck_assert_fails_with(ag_matrix_read_npy(&m, p, &err), err, AG_EINVAL, "row 0, column 2 is -Inf");
    const double big[2] = {1.0, 1e300};             /* fits float64, not float32 */
    write_npy_raw(p, "<f8", 0, "(1, 2)", big, sizeof big);
    ck_assert_fails_with(ag_matrix_read_npy(&m, p, &err), err, AG_EINVAL, "outside float32");
}
END_TEST

Suite *npy_suite(void)
{
    Suite *s = suite_create("npy");
    TCase *tc = tcase_create("npy");
    tcase_add_test(tc, roundtrip_f32);
    tcase_add_test(tc, roundtrip_any_rank);
    tcase_add_test(tc, roundtrip_i64);
    tcase_add_test(tc, reads_f64_and_fortran_order);
    tcase_add_test(tc, reads_integers_and_big_endian);
    tcase_add_test(tc, reads_index_arrays);
    tcase_add_test(tc, refuses_what_it_cannot_read);
    tcase_add_test(tc, refuses_non_finite_naming_row_and_column);
    suite_add_tcase(s, tc);
    return s;
}
