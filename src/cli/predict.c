/* run --predict: the classes by a linear readout of the final states. */
#include <stdlib.h>

#include "cli/cli.h"
#include "base/base.h"
#include "model/model.h"

int write_predictions(const char *path, const char *weights, int readout, const float *X,
                      int64_t N, int64_t D, ag_error_t *err)
{
    int64_t C = D;   /* no readout: the states are the logits */
    float *wr = NULL, *br = NULL;
    int rc = readout ? ag_i_readout_read(weights, D, &C, &wr, &br, err) : AG_OK;
    if (rc == AG_EIO) {   /* most likely a folder of weights without a trained readout */
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        return ag_fail(err, AG_EIO, "--predict: %s (the readout of a model that train --save "
                       "wrote)", why);
    }
    int64_t *pred = rc ? NULL : ag_alloc(N, sizeof *pred, err, "predictions");
    if (!rc && !pred)
        rc = ag_alloc_status();
    if (!rc) {
        ag_readout_predict(X, N, D, wr, br, C, pred);
        rc = ag_npy_write_i64(path, pred, N, err);
    }
    free(pred), free(wr), free(br);
    return rc;
}
