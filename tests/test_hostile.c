/* Inputs made to break the parsers: each once crashed, hung or misreported. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* An unclosed '(' at the end of the spec once stepped the parser past the end
   of the string, one byte per '('; deep nesting overflowed the stack. */
START_TEST(pattern_parser_stays_inside_the_spec)
{
    ag_error_t err;
    ag_pattern_t *p;
    ck_assert_fails_with(ag_pattern_parse(&p, "(", &err), err, AG_EINVAL, "ends where a name");
    ck_assert_fails_with(ag_pattern_parse(&p, "((", &err), err, AG_EINVAL, "ends where a name");
    ck_assert_fails_with(ag_pattern_parse(&p, "(causal", &err), err, AG_EINVAL,
                         "never closed");
    ck_assert_fails_with(ag_pattern_parse(&p, "!(!", &err), err, AG_EINVAL, "ends where a name");

    /* 64 levels parse; 65 are refused with the limit named */
    char spec[20000];
    int n = 0;
    for (int k = 0; k < 64; k++)
        spec[n++] = k % 2 ? '(' : '!';
    n += sprintf(spec + n, "causal");
    for (int k = 0; k < 64; k++)
        if (k % 2 == 0)
            spec[n++] = ')';
    spec[n] = '\0';
    ck_assert_int_eq(ag_pattern_parse(&p, spec, &err), AG_OK);
    ag_pattern_free(p);
    memset(spec, '(', 3000);
    spec[3000] = '\0';
    ck_assert_fails_with(ag_pattern_parse(&p, spec, &err), err, AG_ELIMIT, "deeper than 64");
    ck_assert_ptr_null(p);

    /* a long chain of operators is refused before it makes a deep tree */
    n = 0;
    for (int k = 0; k < 2100; k++)
        n += sprintf(spec + n, "causal+");
    sprintf(spec + n, "causal");
    ck_assert_fails_with(ag_pattern_parse(&p, spec, &err), err, AG_ELIMIT, "more than 4096");
    ck_assert_msg(strlen(err.msg) < 200, "the long spec is shortened: %s", err.msg);
}
END_TEST

START_TEST(cli_refuses_deep_nesting)
{
    char args[3200] = "run --nodes 4 --pattern '";
    size_t n = strlen(args);
    memset(args + n, '(', 3000);
    strcpy(args + n + 3000, "'");
    char *err;
    ck_assert_int_eq(run_cli(args, NULL, &err), 2);
    ck_assert_ptr_nonnull(strstr(err, "deeper than 64 levels"));
    free(err);
}
END_TEST

/* indptr = [0, 162, 0] with no indices: every node's indices were read before
   the later indptr values were checked. */
START_TEST(csr_checks_indptr_before_reading_indices)
{
    ag_error_t err;
    ag_nbhd_t nb;
    const int64_t indptr[3] = {0, 162, 0};
    int64_t *no_indices = calloc(1, sizeof(int64_t));   /* ASan sees any read past it */
    ck_assert_fails_with(ag_nbhd_from_csr(&nb, 2, indptr, no_indices, &err), err, AG_EINVAL,
                         "indptr decreases at 1 (162 then 0)");
    free(no_indices);
}
END_TEST

/* A 128-byte file claiming shape (2, 999999999999999) once made the reader
   allocate for the shape ("out of memory allocating 4e+06 MB"). */
START_TEST(npy_shape_is_checked_against_the_file)
{
    const char *path = tmp_path("liar.npy");
    const float two[2] = {1, 2};
    write_npy_raw(path, "<f4", 0, "(2, 999999999999999)", two, sizeof two);
    ag_error_t err;
    ag_matrix_t m;
    ck_assert_fails_with(ag_matrix_read_npy(&m, path, &err), err, AG_EFORMAT,
                         "declares 1999999999999998 values");
    ck_assert_ptr_nonnull(strstr(err.msg, "holds 8 bytes of data (2 values)"));
    int64_t *idx, n;
    write_npy_raw(path, "<i8", 0, "(999999999999,)", two, sizeof two);
    ck_assert_fails_with(ag_index_read_npy(&idx, &n, path, &err), err, AG_EFORMAT,
                         "declares 999999999999 values");
    /* one value short is still refused */
    write_npy_raw(path, "<f4", 0, "(3,)", two, sizeof two);
    ck_assert_fails_with(ag_matrix_read_npy(&m, path, &err), err, AG_EFORMAT, "(2 values)");
}
END_TEST

/* Features of 1e30 are finite, but their scores overflow float32: the run
   once wrote NaN everywhere with exit 0. */
START_TEST(overflow_is_refused_not_written)
{
    float x[4 * 16];
    fill_uniform(x, 4 * 16, 3, 1e30f);
    const char *feat = tmp_path("huge_features.npy"), *out = tmp_path("huge_out.npy");
    ck_assert_int_eq(ag_npy_write_f32(feat, x, 4, 16, &(ag_error_t){0}), AG_OK);
    char args[1024];
    snprintf(args, sizeof args, "run graphs/sentence.gml --features %s --out %s", feat, out);
    expect_cli(args, 1, 2, "the computation overflowed float32");
    ck_assert(!file_exists(out));
}
END_TEST

/* The memory budget: an allocation over it is refused before it is tried,
   naming what it was for; a run's states are checked before anything large. */
START_TEST(memory_budget_refuses_before_allocating)
{
    ag_error_t err;
    ag_matrix_t m;
    const int64_t old = ag_set_memory_budget(100 << 20);
    ck_assert_int_eq(ag_memory_budget(), 100 << 20);
    ck_assert_fails_with(ag_matrix_init(&m, 50000, 1000, &err), err, AG_ELIMIT,
                         "matrix needs 0.2 GB; the memory budget is 0.105 GB");
    ck_assert_int_eq(ag_matrix_init(&m, 1000, 1000, &err), AG_OK);   /* 4 MB fits */
    ag_matrix_destroy(&m);
    ag_set_memory_budget(old);
    ck_assert_int_gt(ag_memory_budget(), 100 << 20);   /* this machine's available memory */

    expect_cli("run --pattern causal --nodes 20000000 --dim 64 --heads 4 --max-memory 8G", 1, 2,
               "20000000 nodes with D=64 and 4 heads of width 16 need 41 GB of states; the "
               "memory budget is 8 GB");
    expect_cli("run --pattern causal --nodes 4000 --dim 64 --max-memory 1M", 1, 2,
               "need 0.00819 GB of states");
    expect_cli("run --pattern causal --nodes 4000 --dim 64 --max-memory 20M --quiet", 0, 1, "");
    expect_cli("run --pattern causal --nodes 4 --max-memory 8X", 2, 2, "is not a size");
}
END_TEST

Suite *hostile_suite(void)
{
    Suite *s = suite_create("hostile");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 20);   /* runs of the tool on 4,000 nodes: slow on a busy machine */
    tcase_add_test(tc, pattern_parser_stays_inside_the_spec);
    tcase_add_test(tc, cli_refuses_deep_nesting);
    tcase_add_test(tc, csr_checks_indptr_before_reading_indices);
    tcase_add_test(tc, npy_shape_is_checked_against_the_file);
    tcase_add_test(tc, overflow_is_refused_not_written);
    tcase_add_test(tc, memory_budget_refuses_before_allocating);
    suite_add_tcase(s, tc);
    return s;
}
