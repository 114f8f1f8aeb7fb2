/* Defects the fuzz targets (tests/fuzz/) found, one test each; the inputs
   themselves are in tests/fuzz/crashes/ and replayed by make check. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* grid:HxW,R walked the rows y-R .. y+R before clamping them to the grid:
   R = 2^40 took 2^41 steps per node (fuzz_pattern, a timeout). */
START_TEST(grid_radius_beyond_the_grid)
{
    ag_error_t err;
    ag_pattern_t *p;
    ag_nbhd_t nb;
    ck_assert_int_eq(ag_pattern_parse(&p, "grid:3x4,1099511627776", &err), AG_OK);
    ck_assert_int_eq(ag_nbhd_from_pattern(&nb, p, 12, AG_SELF_KEEP, &err), AG_OK);
    ck_assert_int_eq(nb.n_edges, 144);   /* a radius past the grid: every node reads all */
    ck_assert_int_eq(nb.n_runs, 12);
    ag_nbhd_destroy(&nb);
    ag_pattern_free(p);
}
END_TEST

Suite *fuzz_suite(void)
{
    Suite *s = suite_create("fuzz");
    TCase *tc = tcase_create("found");
    tcase_add_test(tc, grid_radius_beyond_the_grid);
    suite_add_tcase(s, tc);
    return s;
}
