/*
 * A weights folder, as `attngraph run --weights DIR` reads it: ag_weights_load,
 * then one round on a small causal graph when it loaded.
 * Byte 0: H = 1 + byte % 4, and (bit 7) LayerNorm on. Then files in the
 * order wq, wk, wv, wo, ln_weight, ln_bias, attn_src, attn_dst, attn, each
 * a 2-byte little-endian length and that many bytes; length 0xffff leaves
 * the file out. Input that ends early leaves the remaining files out.
 */
#include <stdlib.h>
#include <string.h>

#include "attngraph.h"
#include "fuzz_common.h"

#define MAX_N 8

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_setup();
    return 0;
}

static const char *const files[] = {"wq.npy", "wk.npy", "wv.npy", "wo.npy", "ln_weight.npy",
                                    "ln_bias.npy", "attn_src.npy", "attn_dst.npy", "attn.npy"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_bytes_t b = {data, size};
    uint8_t head = fuzz_u8(&b);
    int64_t H = 1 + head % 4;
    fuzz_clear();
    for (size_t k = 0; k < sizeof files / sizeof files[0] && b.n >= 2; k++) {
        uint16_t len = fuzz_u16(&b);
        if (len == 0xffff)
            continue;
        size_t n = len < b.n ? len : b.n;
        if (fuzz_write(fuzz_path(files[k]), b.p, n))
            return 0;
        b.p += n, b.n -= n;
    }
    ag_error_t err;
    ag_weights_t w;
    if (ag_weights_load(&w, fuzz_dir(), H, &err) != AG_OK) {
        ag_weights_destroy(&w);   /* zeroed on failure: safe */
        return 0;
    }
    int64_t N = w.per_node ? w.per_node : 5;
    if (N <= MAX_N && w.D * w.H * w.d <= 4096) {
        ag_pattern_t *pat;
        ag_nbhd_t nb;
        if (ag_pattern_parse(&pat, "causal", &err) == AG_OK) {
            if (ag_nbhd_from_pattern(&nb, pat, N, AG_SELF_KEEP, &err) == AG_OK) {
                float *X = malloc((size_t)(N * w.D) * sizeof(float));
                ag_random_normal(X, N * w.D, 3, 0, 1);
                ag_workspace_t ws;
                ag_round_opts_t opts;
                ag_round_opts_init(&opts);
                opts.norm = (head & 0x80) ? AG_NORM_LAYER : AG_NORM_NONE;
                ag_score_t score;
                ag_score_init(&score, AG_SCORE_SCALED_DOT);
                if (w.attn_src && w.attn_dst)
                    score.kind = AG_SCORE_ADDITIVE;
                else if (w.attn)
                    score.kind = AG_SCORE_GATV2;
                opts.score = &score;
                if (ag_workspace_init(&ws, N, w.H * w.d, w.D, &err) == AG_OK)
                    ag_rounds_run(&nb, &w, 1, X, 1, &opts, &ws, NULL, &err);
                ag_workspace_destroy(&ws);
                free(X);
                ag_nbhd_destroy(&nb);
            }
            ag_pattern_free(pat);
        }
    }
    ag_weights_destroy(&w);
    return 0;
}
