#define _XOPEN_SOURCE 700   /* nftw */
/*
 * The Check runner. Tests fork (so a crash is a failure, not the end of the
 * run); the runner itself must never run OpenMP, or forked tests that use it
 * hang (libgomp's threads do not survive fork).
 */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

char test_scratch_dir[256] = "/tmp/attngraph-test-XXXXXX";

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

int main(int argc, char **argv)
{
    (void)argc, (void)argv;
    if (!mkdtemp(test_scratch_dir)) {
        perror("mkdtemp");
        return 1;
    }
    igraph_set_attribute_table(&igraph_cattribute_table);
    SRunner *sr = srunner_create(npy_suite());
    srunner_add_suite(sr, npz_suite());
    srunner_add_suite(sr, graph_suite());
    srunner_add_suite(sr, kernel_suite());
    srunner_add_suite(sr, pattern_suite());
    srunner_add_suite(sr, pattern_graph_suite());
    srunner_add_suite(sr, gps_suite());
    srunner_add_suite(sr, score_suite());
    srunner_add_suite(sr, fast_suite());
    srunner_add_suite(sr, kernel_plan_suite());
    srunner_add_suite(sr, figures_suite());
    srunner_add_suite(sr, model_suite());
    srunner_add_suite(sr, cli_suite());
    srunner_add_suite(sr, runtime_suite());
    srunner_add_suite(sr, hostile_suite());
    srunner_add_suite(sr, options_suite());
    srunner_add_suite(sr, outputs_suite());
    srunner_add_suite(sr, graph_files_suite());
    srunner_add_suite(sr, compare_suite());
    srunner_add_suite(sr, fuzz_suite());
    srunner_add_suite(sr, transpose_suite());
    srunner_add_suite(sr, backward_suite());
    srunner_add_suite(sr, train_cli_suite());
    srunner_add_suite(sr, training_suite());
    srunner_add_suite(sr, layers_suite());
    srunner_add_suite(sr, lm_suite());
    srunner_add_suite(sr, lm_data_suite());
    srunner_add_suite(sr, model_file_suite());
    srunner_add_suite(sr, fused_backward_suite());
    srunner_add_suite(sr, part_suite());
    srunner_add_suite(sr, draw_suite());
    srunner_add_suite(sr, draw_cli_suite());
    srunner_add_suite(sr, partition_suite());
    srunner_add_suite(sr, plan_suite());
    srunner_add_suite(sr, self_loops_suite());
    srunner_add_suite(sr, budget_suite());
    srunner_add_suite(sr, tape_suite());
    srunner_add_suite(sr, sgemm_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    nftw(test_scratch_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return failed ? 1 : 0;
}
