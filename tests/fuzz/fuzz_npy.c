/*
 * .npy readers. Byte 0 picks the reader (matrix, any-rank array, index); the
 * rest is the file. A matrix that reads is checked and written back.
 */
#include <stdlib.h>

#include "attngraph.h"
#include "fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_setup();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *path = fuzz_path("in.npy");
    if (fuzz_write(path, data + 1, size - 1))
        return 0;
    ag_error_t err;
    switch (data[0] % 3) {
    case 0: {
        ag_matrix_t m;
        if (ag_matrix_read_npy(&m, path, &err) == AG_OK) {
            ag_check_finite("m", m.data, m.rows, m.cols, &err);
            ag_npy_write_f32(fuzz_path("out.npy"), m.data, m.rows, m.cols, &err);
        }
        ag_matrix_destroy(&m);
        break;
    }
    case 1: {
        ag_array_t a;
        if (ag_array_read_npy(&a, path, &err) == AG_OK)
            ag_npy_write_f32_nd(fuzz_path("out.npy"), a.data, a.ndim, a.shape, &err);
        ag_array_destroy(&a);
        break;
    }
    default: {
        int64_t *values = NULL, n = 0;
        if (ag_index_read_npy(&values, &n, path, &err) == AG_OK) {
            int64_t sum = 0;   /* touch every value */
            for (int64_t k = 0; k < n; k++)
                sum ^= values[k];
            (void)sum;
        }
        free(values);
        break;
    }
    }
    return 0;
}
