/*
 * A language model's data beside text: the recall tasks (MQAR as Zoology
 * defines it, copy) checked property by property against their definitions;
 * the token and example readers against files written by hand here (nanoGPT's
 * uint16 .bin, .npy of other dtypes), with every refusal naming the file and
 * the index; and lm task / lm train --examples / --tokens from the command
 * line, accuracy included, nothing written on bad input.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define N_EX 64

/* MQAR: keys distinct in 1..V/2-1, values distinct in V/2..V-1, the pairs
   first; each key asked once after them, its value the target there, its
   distance the query's place minus the key's; nothing else scored. */
START_TEST(mqar_keeps_its_definition)
{
    const ag_lm_task_t t = {.kind = AG_TASK_MQAR, .vocab = 64, .length = 48, .pairs = 6,
                            .power = 0.01, .seed = 5};
    const int64_t T = t.length, P = t.pairs;
    int64_t *x = malloc(N_EX * T * sizeof *x), *y = malloc(N_EX * T * sizeof *y),
            *dist = malloc(N_EX * T * sizeof *dist);
    ag_error_t err;
    ck_assert_msg(ag_lm_task_make(&t, 0, N_EX, x, y, dist, &err) == AG_OK, "%s", err.msg);
    int64_t gap_sum = 0;
    for (int64_t e = 0; e < N_EX; e++) {
        const int64_t *xe = x + e * T, *ye = y + e * T, *de = dist + e * T;
        int asked[6] = {0};
        for (int64_t k = 0; k < P; k++) {
            ck_assert(xe[2 * k] >= 1 && xe[2 * k] < 32);
            ck_assert(xe[2 * k + 1] >= 32 && xe[2 * k + 1] < 64);
            for (int64_t j = 0; j < k; j++)
                ck_assert(xe[2 * j] != xe[2 * k] && xe[2 * j + 1] != xe[2 * k + 1]);
            ck_assert_int_eq(ye[2 * k], -1);
            ck_assert_int_eq(ye[2 * k + 1], -1);
        }
        int64_t scored = 0;
        for (int64_t i = 0; i < T; i++) {
            ck_assert(xe[i] >= 0 && xe[i] < 64);
            if (ye[i] < 0) {
                ck_assert_int_eq(de[i], 0);
                continue;
            }
            scored++;
            ck_assert_msg(i >= 2 * P && (i - 2 * P) % 2 == 0, "a query at %lld", (long long)i);
            int64_t k = 0;
            while (k < P && xe[2 * k] != xe[i])
                k++;
            ck_assert_msg(k < P, "example %lld: the query at %lld asks no key", (long long)e,
                          (long long)i);
            ck_assert_int_eq(ye[i], xe[2 * k + 1]);
            ck_assert_int_eq(de[i], i - 2 * k);
            asked[k]++;
            gap_sum += (i - 2 * P) / 2;
        }
        ck_assert_int_eq(scored, P);
        for (int64_t k = 0; k < P; k++)
            ck_assert_int_eq(asked[k], 1);
    }
    /* a power of 0.01 draws the early slots first: the gaps' mean is far below
       a uniform draw's ((slots - 1) / 2 = 8.5 for 18 slots) */
    const double mean_gap = (double)gap_sum / (double)(N_EX * P);
    ck_assert_msg(mean_gap < 6.5, "mean gap %.2f", mean_gap);
    /* example k is drawn from (seed, k) alone: a slice, and 1 thread, agree */
    int64_t *x2 = malloc(8 * T * sizeof *x2), *y2 = malloc(8 * T * sizeof *y2);
    const int threads = ag_set_threads(1);
    ck_assert_int_eq(ag_lm_task_make(&t, 20, 8, x2, y2, NULL, &err), AG_OK);
    ag_set_threads(threads);
    ck_assert_int_eq(memcmp(x2, x + 20 * T, (size_t)(8 * T) * sizeof *x2), 0);
    ck_assert_int_eq(memcmp(y2, y + 20 * T, (size_t)(8 * T) * sizeof *y2), 0);
    /* another seed, other examples */
    ag_lm_task_t other = t;
    other.seed = 6;
    ck_assert_int_eq(ag_lm_task_make(&other, 20, 8, x2, y2, NULL, &err), AG_OK);
    ck_assert_int_ne(memcmp(x2, x + 20 * T, (size_t)(8 * T) * sizeof *x2), 0);
    free(x), free(y), free(dist), free(x2), free(y2);
}
END_TEST

/* Copy: T/2 tokens of 1..V-1, the separator 0, the tokens again; each copied
   token is the target of the position before it, T/2 after its first place. */
START_TEST(copy_keeps_its_definition)
{
    const ag_lm_task_t t = {.kind = AG_TASK_COPY, .vocab = 10, .length = 12, .seed = 2};
    int64_t x[4 * 12], y[4 * 12], d[4 * 12];
    ag_error_t err;
    ck_assert_msg(ag_lm_task_make(&t, 0, 4, x, y, d, &err) == AG_OK, "%s", err.msg);
    for (int e = 0; e < 4; e++) {
        const int64_t *xe = x + 12 * e, *ye = y + 12 * e, *de = d + 12 * e;
        ck_assert_int_eq(xe[6], 0);
        for (int i = 0; i < 6; i++) {
            ck_assert(xe[i] >= 1 && xe[i] < 10);
            ck_assert_int_eq(ye[i], -1);
            ck_assert_int_eq(ye[6 + i], xe[i]);
            ck_assert_int_eq(de[6 + i], 6);
            if (i)
                ck_assert_int_eq(xe[6 + i], xe[i - 1]);
        }
    }
}
END_TEST

START_TEST(recall_task_refusals)
{
    ag_error_t err;
    ag_lm_task_t t = {.kind = AG_TASK_MQAR, .vocab = 64, .length = 16, .pairs = 5,
                      .power = 0.01};
    ck_assert_fails_with(ag_lm_task_make(&t, 0, 0, NULL, NULL, NULL, &err), err, AG_EINVAL,
                         "5 pairs in 16 tokens; expected 1 <= pairs <= length/4");
    t.pairs = 4, t.vocab = 8;
    ck_assert_fails_with(ag_lm_task_make(&t, 0, 0, NULL, NULL, NULL, &err), err, AG_EINVAL,
                         "a vocabulary of 8 has 3 keys");
    t.vocab = 64, t.power = 0;
    ck_assert_fails_with(ag_lm_task_make(&t, 0, 0, NULL, NULL, NULL, &err), err, AG_EINVAL,
                         "power 0; expected a value in (0, 1]");
    t.power = 1, t.length = 15;
    ck_assert_fails_with(ag_lm_task_make(&t, 0, 0, NULL, NULL, NULL, &err), err, AG_EINVAL,
                         "an even length");
    t.length = 16;
    ck_assert_int_eq(ag_lm_task_make(&t, 0, 0, NULL, NULL, NULL, &err), AG_OK);
    ck_assert_fails_with(ag_lm_task_make(&t, 0, 1, NULL, NULL, NULL, &err), err, AG_EINVAL,
                         "no inputs");
}
END_TEST

/* Raw bytes into path. */
static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

/* nanoGPT's .bin (uint16 little-endian, written byte by byte here) and a .npy
   stream of uint16 read to the same ids; each refusal names the file and index. */
START_TEST(token_streams_read_and_refuse)
{
    const unsigned char bin[] = {1, 0, 0, 1, 255, 255, 7, 0};   /* 1, 256, 65535, 7 */
    char path[1024], npy[1024];
    snprintf(path, sizeof path, "%s", tmp_path("t.bin"));
    snprintf(npy, sizeof npy, "%s", tmp_path("t.npy"));
    write_bytes(path, bin, sizeof bin);
    const uint16_t raw[4] = {1, 256, 65535, 7};
    write_npy_raw(npy, "<u2", 0, "(4,)", raw, sizeof raw);
    ag_error_t err;
    int64_t *ids, n;
    for (int k = 0; k < 2; k++) {
        ck_assert_msg(ag_lm_tokens_read(&ids, &n, k ? npy : path, 0, &err) == AG_OK, "%s",
                      err.msg);
        ck_assert_int_eq(n, 4);
        ck_assert_int_eq(ids[0], 1);
        ck_assert_int_eq(ids[1], 256);
        ck_assert_int_eq(ids[2], 65535);
        ck_assert_int_eq(ids[3], 7);
        free(ids);
    }
    ck_assert_fails_with(ag_lm_tokens_read(&ids, &n, path, 65535, &err), err, AG_EINVAL,
                         "t.bin: token 2 is 65535; expected an id in 0..65534 (a vocabulary "
                         "of 65535)");
    write_bytes(path, bin, 7);
    ck_assert_fails_with(ag_lm_tokens_read(&ids, &n, path, 0, &err), err, AG_EFORMAT,
                         "t.bin: 7 bytes, an odd count");
    write_bytes(path, bin, 0);
    ck_assert_fails_with(ag_lm_tokens_read(&ids, &n, path, 0, &err), err, AG_EINVAL,
                         "t.bin: no tokens");
    const int64_t two[4] = {1, 2, 3, 4};
    write_npy_raw(npy, "<i8", 0, "(2, 2)", two, sizeof two);
    ck_assert_fails_with(ag_lm_tokens_read(&ids, &n, npy, 0, &err), err, AG_EFORMAT,
                         "2 dimensions; expected a 1-D stream");
    ck_assert_fails_with(ag_lm_tokens_read(&ids, &n, tmp_path("t.txt"), 0, &err), err,
                         AG_EINVAL, "expected a .bin file");
}
END_TEST

/* Example sets: -100 becomes -1 (not scored); the shapes must agree; an id out
   of the vocabulary is named by row and position. */
START_TEST(example_sets_read_and_refuse)
{
    char in[1024], tg[1024];
    snprintf(in, sizeof in, "%s", tmp_path("in.npy"));
    snprintf(tg, sizeof tg, "%s", tmp_path("tg.npy"));
    const int32_t x[6] = {1, 2, 3, 4, 5, 6};
    const int32_t y[6] = {-100, 3, -100, -100, 6, -100};
    write_npy_raw(in, "<i4", 0, "(2, 3)", x, sizeof x);
    write_npy_raw(tg, "<i4", 0, "(2, 3)", y, sizeof y);
    ag_error_t err;
    int64_t *X, *Y, n, T;
    ck_assert_msg(ag_lm_examples_read(&X, &Y, &n, &T, in, tg, 8, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(T, 3);
    const int64_t want[6] = {-1, 3, -1, -1, 6, -1};
    for (int i = 0; i < 6; i++) {
        ck_assert_int_eq(X[i], x[i]);
        ck_assert_int_eq(Y[i], want[i]);
    }
    free(X), free(Y);
    ck_assert_fails_with(ag_lm_examples_read(&X, &Y, &n, &T, in, tg, 6, &err), err, AG_EINVAL,
                         "in.npy: row 1, position 2 is 6; expected a token id in 0..5");
    const int32_t bad[6] = {-100, 3, -7, -100, 1, -100};
    write_npy_raw(tg, "<i4", 0, "(2, 3)", bad, sizeof bad);
    ck_assert_fails_with(ag_lm_examples_read(&X, &Y, &n, &T, in, tg, 8, &err), err, AG_EINVAL,
                         "tg.npy: row 0, position 2 is -7; expected a token id in 0..7 (a "
                         "vocabulary of 8), or -100 (not scored)");
    write_npy_raw(tg, "<i4", 0, "(3, 2)", y, sizeof y);
    ck_assert_fails_with(ag_lm_examples_read(&X, &Y, &n, &T, in, tg, 8, &err), err, AG_EINVAL,
                         "tg.npy is [3, 2]; expected [2, 3], the shape of");
    const int32_t none[6] = {-100, -100, -100, -100, -100, -100};
    write_npy_raw(tg, "<i4", 0, "(2, 3)", none, sizeof none);
    ck_assert_fails_with(ag_lm_examples_read(&X, &Y, &n, &T, in, tg, 8, &err), err, AG_EINVAL,
                         "every target is -100");
}
END_TEST

/* lm task writes what lm train --examples reads; a model that sees the whole
   example (causal) finds the values of its pairs, one that sees itself alone
   (window:1) cannot, and the log's val_acc is what the table says. */
START_TEST(lm_train_learns_recall_from_example_sets)
{
    char dir[1024], args[4096], log[1024];
    snprintf(dir, sizeof dir, "%s", tmp_path("mqar"));
    snprintf(log, sizeof log, "%s", tmp_path("mqar.csv"));
    snprintf(args, sizeof args, "lm task mqar --vocab 32 --length 16 --pairs 2 --train 2000 "
             "--val 128 --out %s --quiet", dir);
    expect_cli(args, 0, 1, "");
    snprintf(args, sizeof args, "lm train --examples %s --layers 2 --heads 2 --dim 32 "
             "--iters 300 --eval-every 300 --lr 1e-2 --warmup 20 --batch 32 --pattern causal "
             "--pattern window:1 --log %s", dir, log);
    char *out, *err;
    ck_assert_int_eq(run_cli(args, &out, &err), 0);
    ck_assert_msg(strstr(out, "examples: ") && strstr(out, "2000 training and 128 validation "
                                                           "examples of 16 tokens"), "%s", out);
    free(out), free(err);
    char *text = read_text(log);
    ck_assert_msg(strstr(text, "pattern,step,train_loss,val_loss,lr,seconds,train_acc,val_acc\n"),
                  "%s", text);
    double acc[2] = {-1, -1};
    for (int k = 0; k < 2; k++) {
        const char *row = strstr(text, k ? "\nwindow:1,300," : "\ncausal,300,");
        ck_assert_ptr_nonnull(row);
        const char *last = row;
        for (int c = 0; c < 7; c++)
            last = strchr(last + 1, ',');
        acc[k] = atof(last + 1);
    }
    free(text);
    /* two values are in each example of 16 possible: causal finds them */
    ck_assert_msg(acc[0] > 0.4 && acc[1] < 0.2, "val acc causal %.3f, window:1 %.3f", acc[0],
                  acc[1]);
}
END_TEST

/* Bad data: each refused naming the file and what was expected, nothing written. */
START_TEST(lm_data_refusals_write_nothing)
{
    char args[4096], dir[1024], save[1024];
    snprintf(dir, sizeof dir, "%s", tmp_path("mq"));
    snprintf(save, sizeof save, "%s", tmp_path("never"));
    snprintf(args, sizeof args, "lm task mqar --vocab 32 --length 16 --pairs 2 --train 20 "
             "--val 8 --out %s --quiet", dir);
    expect_cli(args, 0, 1, "");
    snprintf(args, sizeof args, "lm train --examples %s --block 8 --iters 1 --save %s", dir,
             save);
    expect_cli(args, 1, 2, "train_inputs.npy: examples of 16 tokens, longer than --block 8");
    snprintf(args, sizeof args, "lm train --examples %s --vocab 20 --iters 1 --save %s", dir,
             save);
    expect_cli(args, 1, 2, "expected a token id in 0..19 (a vocabulary of 20)");
    char bin[1024];
    snprintf(bin, sizeof bin, "%s", tmp_path("odd.bin"));
    write_bytes(bin, "abc", 3);
    snprintf(args, sizeof args, "lm train --tokens %s --iters 1 --save %s", bin, save);
    expect_cli(args, 1, 2, "odd.bin: 3 bytes, an odd count");
    snprintf(args, sizeof args, "lm train --tokens %s --text x.txt", bin);
    expect_cli(args, 2, 2, "give one of --text FILE, --tokens TRAIN[,VAL] and --examples DIR");
    expect_cli("lm task mqar --vocab 32 --length 16 --pairs 5 --out x", 2, 2,
               "5 pairs in 16 tokens");
    expect_cli("lm task copy --vocab 32 --length 16 --pairs 2 --out x", 2, 2,
               "--pairs, --power and --fill are MQAR's");
    ck_assert(!file_exists(save));
    ck_assert(!file_exists("x"));
}
END_TEST

/* Token streams from the command line: train.bin,val.bin as nanoGPT writes
   them train a model of ids that saves, and lm sample reads and writes ids. */
START_TEST(lm_train_reads_token_streams)
{
    char train[1024], val[1024], save[1024], args[4096];
    snprintf(train, sizeof train, "%s", tmp_path("train.bin"));
    snprintf(val, sizeof val, "%s", tmp_path("val.bin"));
    snprintf(save, sizeof save, "%s", tmp_path("ids-model"));
    unsigned char b[2 * 600];
    for (int i = 0; i < 600; i++)   /* a cycle of 5 ids: 300, 301, ..., 304 */
        b[2 * i] = (unsigned char)(44 + i % 5), b[2 * i + 1] = 1;
    write_bytes(train, b, sizeof b);
    write_bytes(val, b, 2 * 100);
    snprintf(args, sizeof args, "lm train --tokens %s,%s --block 8 --layers 1 --heads 1 "
             "--dim 16 --iters 150 --lr 1e-2 --eval-every 150 --batch 8 --save %s", train, val,
             save);
    char *out, *err;
    ck_assert_int_eq(run_cli(args, &out, &err), 0);
    ck_assert_msg(strstr(out, "tokens: ") && strstr(out, ": 700, a vocabulary of 305 (train "
                                                         "600, val 100)"), "%s", out);
    free(out), free(err);
    char *text = read_text(tmp_path("ids-model/model.txt"));
    ck_assert_msg(strstr(text, "vocab 305 ids\n"), "%s", text);
    free(text);
    ck_assert(!file_exists(tmp_path("ids-model/vocab.npy")));
    snprintf(args, sizeof args, "lm sample --model %s --start '300 301' --tokens 6 "
             "--temperature 0", save);
    expect_cli(args, 0, 1, "300 301 302 303 304 300 301 302\n");
    snprintf(args, sizeof args, "lm sample --model %s --start '300 305'", save);
    expect_cli(args, 2, 2, "token 2 is '305'; expected ids in 0..304");
}
END_TEST

Suite *lm_data_suite(void)
{
    Suite *s = suite_create("lm_data");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, mqar_keeps_its_definition);
    tcase_add_test(tc, copy_keeps_its_definition);
    tcase_add_test(tc, recall_task_refusals);
    tcase_add_test(tc, token_streams_read_and_refuse);
    tcase_add_test(tc, example_sets_read_and_refuse);
    tcase_add_test(tc, lm_train_learns_recall_from_example_sets);
    tcase_add_test(tc, lm_data_refusals_write_nothing);
    tcase_add_test(tc, lm_train_reads_token_streams);
    suite_add_tcase(s, tc);
    return s;
}
