/*
 * Recall tasks for language models, written from the papers' definitions:
 *
 * - MQAR, multi-query associative recall (Arora et al., "Zoology", ICLR
 *   2024): P key-value pairs k1 v1 k2 v2 ... open the example, keys drawn
 *   without repeats from 1..V/2-1 and values from V/2..V-1; then each key is
 *   asked once more at position 2P + 2g, its gap g one of (T - 2P)/2 slots
 *   drawn without repeats with weight (g + 1)^(a - 1) (a power law: most
 *   queries come soon after the pairs, a few far), and the value is the
 *   target there. The other positions hold random tokens (0 with
 *   zero_fill: Zoology's random_non_queries=False, its Figure 2), not scored.
 * - Copy: T/2 random tokens, the separator 0, then the same tokens again:
 *   each of the second half is the target of the position before it, its
 *   evidence T/2 positions back (a mask that cannot reach that far cannot
 *   copy at all).
 *
 * Example k is drawn from (seed, k) alone, so a set's examples are the same
 * however they are cut or threaded, and train and validation sets are
 * examples 0..n-1 and n..n+m-1 of one seed.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

static double uniform(uint64_t *state)
{
    return (double)(rng_next(state) >> 11) * 0x1p-53;
}

/* n distinct values of lo..hi-1 into out (n <= hi - lo, n small). */
static void distinct(uint64_t *state, int64_t lo, int64_t hi, int64_t n, int64_t *out)
{
    for (int64_t k = 0; k < n; k++) {
        int fresh;
        do {
            out[k] = lo + rng_below(state, hi - lo);
            fresh = 1;
            for (int64_t j = 0; j < k; j++)
                fresh &= out[j] != out[k];
        } while (!fresh);
    }
}

static int check_task(const ag_lm_task_t *t, ag_error_t *err)
{
    const int64_t V = t->vocab, T = t->length, P = t->pairs;
    if (V < 4 || V > AG_LM_MAX_VOCAB || T < 2 || T % 2)
        return ag_fail(err, AG_EINVAL, "recall task: vocabulary %lld and length %lld; expected "
                       "a vocabulary in 4..%d and an even length >= 2", (long long)V,
                       (long long)T, AG_LM_MAX_VOCAB);
    if (t->kind == AG_TASK_COPY && t->zero_fill)
        return ag_fail(err, AG_EINVAL, "recall task: zero_fill is MQAR's; copy's first half "
                       "is random tokens and its separator 0");
    if (t->kind == AG_TASK_COPY)
        return AG_OK;
    if (t->kind != AG_TASK_MQAR)
        return ag_fail(err, AG_EINVAL, "recall task: kind %d; expected AG_TASK_MQAR or "
                       "AG_TASK_COPY", (int)t->kind);
    if (P < 1 || 4 * P > T)
        return ag_fail(err, AG_EINVAL, "MQAR: %lld pairs in %lld tokens; expected 1 <= pairs "
                       "<= length/4 (2 tokens a pair, and a slot of 2 a query)", (long long)P,
                       (long long)T);
    if (P > V / 2 - 1)
        return ag_fail(err, AG_EINVAL, "MQAR: %lld pairs, but a vocabulary of %lld has %lld "
                       "keys (1..V/2-1); expected fewer pairs or more tokens", (long long)P,
                       (long long)V, (long long)(V / 2 - 1));
    if (!(t->power > 0 && t->power <= 1))
        return ag_fail(err, AG_EINVAL, "MQAR: power %g; expected a value in (0, 1] (Zoology's "
                       "0.01; 1 spreads the queries evenly)", t->power);
    return AG_OK;
}

/* One MQAR example into x, y, dist [T] (y -1 and dist 0 where not scored);
   work: 3 P + the slots' weights. */
static void mqar(const ag_lm_task_t *t, uint64_t state, int64_t *x, int64_t *y, int64_t *dist,
                 int64_t *keys, double *w)
{
    const int64_t V = t->vocab, T = t->length, P = t->pairs, slots = (T - 2 * P) / 2;
    int64_t *values = keys + P, *gaps = values + P;
    distinct(&state, 1, V / 2, P, keys);
    distinct(&state, V / 2, V, P, values);
    double total = 0;
    for (int64_t g = 0; g < slots; g++)
        total += w[g] = pow((double)(g + 1), t->power - 1.0);
    for (int64_t k = 0; k < P; k++) {   /* weighted, without repeats: a drawn slot leaves */
        double u = uniform(&state) * total;
        int64_t g = 0;
        while (g < slots - 1 && (w[g] == 0 || u >= w[g]))
            u -= w[g++];
        while (w[g] == 0)   /* rounding at the end: the last slot still open */
            g--;
        total -= w[g], w[g] = 0, gaps[k] = g;
    }
    for (int64_t i = 0; i < T; i++)   /* (the random tokens drawn either way: the same examples) */
        x[i] = rng_below(&state, V) * !t->zero_fill, y[i] = -1, dist[i] = 0;
    for (int64_t k = 0; k < P; k++) {
        const int64_t q = 2 * P + 2 * gaps[k];
        x[2 * k] = keys[k], x[2 * k + 1] = values[k];
        x[q] = keys[k], y[q] = values[k], dist[q] = q - 2 * k;
    }
}

/* One copy example: T/2 tokens of 1..V-1, the separator 0, the tokens again. */
static void copy(const ag_lm_task_t *t, uint64_t state, int64_t *x, int64_t *y, int64_t *dist)
{
    const int64_t T = t->length, m = T / 2;
    for (int64_t i = 0; i < m; i++)
        x[i] = 1 + rng_below(&state, t->vocab - 1);
    x[m] = 0;
    for (int64_t i = 1; i < m; i++)
        x[m + i] = x[i - 1];
    for (int64_t i = 0; i < T; i++) {   /* position p predicts the token after it */
        y[i] = i >= m ? x[i - m] : -1;
        dist[i] = i >= m ? m : 0;
    }
}

int ag_lm_task_make(const ag_lm_task_t *t, int64_t first, int64_t n, int64_t *inputs,
                    int64_t *targets, int64_t *distance, ag_error_t *err)
{
    int rc = check_task(t, err);
    if (rc)
        return rc;
    if (first < 0 || n < 0 || (n > 0 && (!inputs || !targets)))
        return ag_fail(err, AG_EINVAL, "recall task: examples %lld..%lld into %s; expected "
                       "first, n >= 0 and the inputs and targets", (long long)first,
                       (long long)(first + n), inputs ? "no targets" : "no inputs");
    const int64_t T = t->length, slots = T / 2;
    int failed = 0;
#pragma omp parallel num_threads(ag_i_max_threads()) if (n > 1)
    {
        int64_t *keys = malloc((size_t)(3 * (t->pairs > 0 ? t->pairs : 1)) * sizeof *keys);
        double *w = malloc((size_t)slots * sizeof *w);
        int64_t *scratch = distance ? NULL : malloc((size_t)T * sizeof *scratch);
        if (!keys || !w || (!distance && !scratch)) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int64_t k = 0; k < n; k++) {
            if (!keys || !w || (!distance && !scratch))
                continue;
            const uint64_t state = rng_seed(t->seed, (uint64_t)(first + k));
            int64_t *dist = distance ? distance + k * T : scratch;
            if (t->kind == AG_TASK_MQAR)
                mqar(t, state, inputs + k * T, targets + k * T, dist, keys, w);
            else
                copy(t, state, inputs + k * T, targets + k * T, dist);
        }
        free(keys), free(w), free(scratch);
    }
    return failed ? ag_fail(err, AG_ENOMEM, "recall task: out of memory") : AG_OK;
}
