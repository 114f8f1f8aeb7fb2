/* The command line's options, end to end: repeats, abbreviations, options that do not
   apply, help, and the messages and exit codes of mistakes (2: usage, 1: bad input). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"

static const char *const commands[] = {"run", "pattern", "inspect", "bench", "compare"};

START_TEST(single_valued_options_given_twice_are_refused)
{
    expect_cli("run graphs/sentence.gml --heads 2 --heads 4", 2, 2,
               "--heads given twice ('2', then '4'); give it once");
    expect_cli("run --pattern causal --pattern complete --nodes 4", 2, 2,
               "--pattern given twice ('causal', then 'complete')");
    expect_cli("run graphs/sentence.gml --quiet --quiet", 2, 2, "--quiet given twice");
    expect_cli("pattern causal --nodes 3 --out a.graphml --out b.graphml", 2, 2,
               "--out given twice");
    expect_cli("inspect graphs/sentence.gml --top 2 --top 3", 2, 2, "--top given twice");
    expect_cli("bench --pattern causal --nodes 8 --reps 1 --reps 2", 2, 2, "--reps given twice");
    expect_cli("compare --pattern causal --pattern complete --nodes 4 --seed 1 --seed 2", 2, 2,
               "--seed given twice");
    /* compare's connectivities repeat by design */
    expect_cli("compare --pattern causal --pattern complete --pattern window:2 --nodes 5", 0, 1,
               "3 connectivities on 5 nodes");
}
END_TEST

START_TEST(attn_repeats_to_write_several_formats)
{
    char args[1024];
    const char *csv = tmp_path("multi.csv"), *npy = tmp_path("multi.npy");
    remove(csv), remove(npy);
    snprintf(args, sizeof args, "run graphs/sentence.gml --heads 2 --attn %s --attn %s", csv,
             npy);
    expect_cli(args, 0, 1, "wrote");
    ck_assert(file_exists(csv));
    ck_assert(file_exists(npy));
    char *text = read_text(csv);
    ck_assert(strncmp(text, "src,dst,src_label,dst_label,head,weight\n", 40) == 0);
    free(text);
    snprintf(args, sizeof args, "run graphs/sentence.gml --attn %s --attn %s", csv, csv);
    expect_cli(args, 2, 2, "name the same file");
    expect_cli("run graphs/sentence.gml --attn a.txt", 2, 2, "--attn a.txt: this output is .csv, .npy or .graphml");
}
END_TEST

START_TEST(abbreviations_name_the_options_they_could_mean)
{
    expect_cli("run graphs/sentence.gml --att a.csv", 2, 2,
               "ambiguous option '--att': could be --attn or --attn-round");
    expect_cli("run graphs/sentence.gml --head 2", 2, 2,
               "could be --head-dim, --head-messages or --heads");
    /* inspect has no --attn: it is not quietly read as --attn-round */
    expect_cli("inspect graphs/sentence.gml --top 2 --attn a.csv", 2, 2,
               "unknown option '--attn'; did you mean --attn-round?");
    expect_cli("run graphs/sentence.gml --seeds=2", 2, 2, "unknown option '--seeds'");
    expect_cli("run graphs/sentence.gml --see=2", 2, 2, "unknown option '--see'; did you mean "
               "--seed?");
    expect_cli("run graphs/sentence.gml --bogus", 2, 2, "unknown option '--bogus'\n");
    /* misspellings: the nearest names, one or two edits away (a swap is one) */
    expect_cli("train --epcohs 3", 2, 2, "unknown option '--epcohs'; did you mean --epochs?\n");
    expect_cli("run graphs/sentence.gml --haeds 2", 2, 2, "did you mean --heads?\n");
    expect_cli("run graphs/sentence.gml --sed 2", 2, 2, "did you mean --seed?\n");
    expect_cli("run graphs/sentence.gml --attm a.csv", 2, 2, "did you mean --attn?\n");
    /* short names allow one edit: --rond is two from --round(s) */
    expect_cli("train --rond 2", 2, 2, "unknown option '--rond'\n");
    expect_cli("run graphs/sentence.gml --layer-norm", 2, 2, "unknown option '--layer-norm'\n");
    /* exact names win, also when they are a prefix of another option */
    char args[512];
    snprintf(args, sizeof args, "run graphs/sentence.gml --attn-round 1 --attn %s --quiet",
             tmp_path("exact.npy"));
    expect_cli(args, 0, 1, "");
    expect_cli("run graphs/sentence.gml --heads=2", 0, 1, "2 heads of width 8");
    expect_cli("run graphs/sentence.gml --quiet=yes", 2, 2, "option '--quiet' takes no value");
    expect_cli("run graphs/sentence.gml --heads", 2, 2, "option '--heads' needs a value");
}
END_TEST

START_TEST(options_that_do_not_apply_are_refused)
{
    expect_cli("run graphs/sentence.gml --slope 0.1", 2, 2,
               "--slope is the LeakyReLU slope of --score additive and gatv2; it does not "
               "apply to scaled-dot");
    expect_cli("run graphs/sentence.gml --score additive --slope 0.1 --quiet", 0, 1, "");
    expect_cli("run graphs/sentence.gml --sigmoid-bias -1", 2, 2,
               "--sigmoid-bias is for --score sigmoid; it does not apply to scaled-dot");
    expect_cli("run graphs/sentence.gml --score sigmoid --sigmoid-bias -1 --quiet", 0, 1, "");
    expect_cli("run graphs/sentence.gml --score sigmoid --softcap 5", 2, 2,
               "--softcap applies to softmax scores; sigmoid scores");
    expect_cli("run graphs/sentence.gml --score linear --alibi", 2, 2, "--alibi adds to scores");
    /* raw Q/K/V refuses round options (as before); bench refuses the model's options */
    expect_cli("run graphs/sentence.gml --q a --k b --v c --rounds 3", 2, 2, "round options");
    expect_cli("bench --pattern causal --nodes 8 --alibi", 2, 2,
               "--alibi does not apply: bench times one round of attention");
    expect_cli("bench --pattern causal --nodes 8 --rounds 2", 2, 2, "--rounds does not apply");
    /* bench takes the score: additive and gatv2 with seeded vectors, on the generic kernel */
    expect_cli("bench --pattern causal --nodes 40 --score additive --reps 1 --json", 0, 1,
               "\"kernel\": \"generic\"");
    expect_cli("bench --pattern causal --nodes 40 --score gatv2 --backward --reps 1", 0, 1,
               "generic kernel: backward median");
    expect_cli("bench --pattern causal --nodes 40 --score dot --beta 0.5 --reps 1 --json", 0, 1,
               "\"kernel\": \"tiled\"");
    expect_cli("bench --pattern causal --nodes 40 --score sigmoid --softcap 3", 2, 2,
               "--softcap applies to softmax scores");
    /* bench's heads are --head-dim wide (64): run's default width does not apply */
    expect_cli("bench --pattern causal --nodes 8 --heads 6 --reps 1 --json", 0, 1, "\"H\": 6");
    expect_cli("inspect graphs/sentence.gml --top 1 --quiet", 2, 2, "--quiet does not apply");
    /* options that only qualify another option, or a kind of source */
    expect_cli("run graphs/sentence.gml --max-edges 10", 2, 2,
               "--max-edges limits the --attn export; give --attn");
    expect_cli("inspect graphs/sentence.gml --who 0 --max-edges 10", 2, 2,
               "--max-edges limits --top");
    expect_cli("inspect graphs/sentence.gml --top 1 --attn-round 2", 2, 2,
               "--attn-round 2, but the run has 1 round\n");
    expect_cli("run --pattern causal --nodes 4 --format gml", 2, 2,
               "--format names the format of a GRAPH file");
    expect_cli("bench --pattern causal --nodes 4 --format gml", 2, 2, "--format names");
    expect_cli("compare --pattern causal --pattern complete --nodes 4 --format gml", 2, 2,
               "--format names the format of --graph files");
    expect_cli("compare --graph graphs/sentence.gml --graph graphs/sentence.gml --nodes 4", 2, 2,
               "every connectivity is a --graph file");
    /* --rounds 0 did nothing at all */
    expect_cli("run graphs/sentence.gml --rounds 0", 2, 2,
               "--rounds '0' is not an integer in 1..1000000");
    expect_cli("inspect graphs/sentence.gml --top 1 --rounds 0", 2, 2, "--rounds '0'");
}
END_TEST

START_TEST(help_for_every_command)
{
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++) {
        char args[128], usage[128];
        snprintf(usage, sizeof usage, "usage: attngraph %s", commands[k]);
        snprintf(args, sizeof args, "%s -h", commands[k]);
        expect_cli(args, 0, 1, usage);
        snprintf(args, sizeof args, "%s --help", commands[k]);
        expect_cli(args, 0, 1, usage);
        snprintf(args, sizeof args, "help %s", commands[k]);
        expect_cli(args, 0, 1, usage);
        snprintf(args, sizeof args, "%s --hel", commands[k]);
        expect_cli(args, 2, 2, "did you mean --help?");
    }
    expect_cli("grad -h", 0, 1, "usage: attngraph grad");
    expect_cli("help plan", 0, 1, "usage: attngraph plan");
    expect_cli("plan --hel", 2, 2, "did you mean --help?");
    expect_cli("help train", 0, 1, "usage: attngraph train");
    expect_cli("train --epoch 3", 2, 2, "did you mean --epochs?");
    /* train's help lists only what train takes: not run's raw mode, --dim or --until */
    char *out = NULL;
    ck_assert_int_eq(run_cli("train --help", &out, NULL), 0);
    ck_assert_ptr_nonnull(strstr(out, "--norm layer|none"));
    const char *not_train[] = {"--q Q.npy", "--dim D", "--until TOL"};
    for (size_t k = 0; k < sizeof not_train / sizeof not_train[0]; k++)
        ck_assert_msg(!strstr(out, not_train[k]), "train --help lists %s", not_train[k]);
    free(out);
    expect_cli("help", 0, 1, "commands:");
    expect_cli("help frobnicate", 2, 2, "unknown command 'frobnicate'");
}
END_TEST

/* Every command's options come from one table that also writes its help; the
   parser checks at each start that the help names every option it takes (a
   fault exits 70, "internal error"). So every command and kind here prints
   its help, lists -h, and takes --help whole. */
START_TEST(every_command_lists_its_options_and_help)
{
    static const char *const all[] = {"run", "pattern", "inspect", "bench", "compare", "grad",
                                      "train", "plan", "draw heatmap", "draw graph",
                                      "draw rounds", "draw train", "lm train", "lm sample"};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        char args[128], usage[128];
        snprintf(usage, sizeof usage, "attngraph %s ", all[k]);   /* on a usage line */
        snprintf(args, sizeof args, "%s --help", all[k]);
        char *out = NULL;
        ck_assert_int_eq(run_cli(args, &out, NULL), 0);
        ck_assert_msg(strncmp(out, "usage: ", 7) == 0 && strstr(out, usage), "%s: %.60s", args,
                      out);
        ck_assert_msg(strstr(out, "  -h, --help          this text\n"), "%s: no -h line", args);
        free(out);
        snprintf(args, sizeof args, "%s --nosuch", all[k]);
        expect_cli(args, 2, 2, "unknown option '--nosuch'");
    }
}
END_TEST

START_TEST(messages_name_the_real_limits)
{
    expect_cli("run --pattern causal --nodes 0", 2, 2,
               "--nodes '0' is not an integer in 1..20000000 (the default --max-nodes)");
    expect_cli("run --pattern causal --nodes 50 --max-nodes 10", 2, 2,
               "--nodes '50' is not an integer in 1..10 (--max-nodes)");
    expect_cli("pattern causal --nodes 0 --out x.graphml", 2, 2, "in 1..20000000");
    expect_cli("run --pattern causal --nodes 4 --max-nodes 0", 2, 2,
               "--max-nodes '0' is not an integer >= 1");
    /* the --beta messages agree */
    expect_cli("run graphs/sentence.gml --beta -1", 2, 2, "--beta '-1' is not a number >= 0");
    expect_cli("run graphs/sentence.gml --beta x", 2, 2, "--beta 'x' is not a number >= 0");
    expect_cli("run graphs/sentence.gml --until 0", 2, 2, "--until '0' is not a number > 0");
}
END_TEST

START_TEST(input_mistakes_say_what_is_wrong)
{
    expect_cli("run graphs", 1, 2, "graphs is a directory, not a graph file");
    expect_cli("compare --graph graphs --graph graphs/sentence.gml", 1, 2,
               "graphs is a directory");
    /* DOT is written (pattern), never read: it is not offered for reading */
    char *out, *err;
    ck_assert_int_eq(run_cli("run graphs/sentence.gml --format xyz", &out, &err), 2);
    ck_assert_msg(strstr(err, "expected edgelist, ncol, lgl, graphml, gml, pajek or npz"), "%s",
                  err);
    free(out), free(err);
    ck_assert_int_eq(run_cli("run graphs/sentence.unknown", &out, &err), 2);
    ck_assert_msg(strstr(err, ".gml, .net or .npz (or name the format") && !strstr(err, ".dot"), "%s",
                  err);
    free(out), free(err);
    expect_cli("run x.dot", 2, 2, "DOT files can be written, not read");
}
END_TEST

START_TEST(same_mistake_same_exit_code)
{
    /* usage mistakes: 2, from every command */
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++) {
        char args[256];
        const char *extra = strcmp(commands[k], "inspect") == 0   ? "--top 1"
                            : strcmp(commands[k], "compare") == 0 ? "--pattern complete"
                                                                  : "";
        snprintf(args, sizeof args, "%s --pattern causal --nodes 4 --heads 0 %s", commands[k],
                 extra);
        expect_cli(args, 2, 2, commands[k][0] == 'p' ? "unknown option '--pattern'"
                                                     : "--heads '0'");
        snprintf(args, sizeof args, "%s --pattern causal --tokens ' ' %s", commands[k], extra);
        expect_cli(args, 2, 2, commands[k][0] == 'p' ? "unknown option '--pattern'"
                                                     : "has no tokens");
    }
    expect_cli("pattern causal --tokens ' ' --out x.graphml", 2, 2, "has no tokens");
    expect_cli("pattern causal --nodes 3 --tokens 'a b' --out x.graphml", 2, 2,
               "--tokens has 2 labels, but --nodes is 3");
    expect_cli("run --pattern blocks:1 --nodes 3", 2, 2, "'blocks:1' covers 1 node, but there "
               "are 3");
    expect_cli("inspect graphs/sentence.gml --top x", 2, 2, "--top 'x' is not an integer >= 1");
    expect_cli("bench --pattern causal --nodes 8 --reps 0", 2, 2,
               "--reps '0' is not an integer >= 1");
    /* bad input files: 1, from every command that reads one */
    expect_cli("run missing.gml", 1, 2, "missing.gml");
    expect_cli("inspect missing.gml --top 1", 1, 2, "missing.gml");
    expect_cli("bench missing.gml", 1, 2, "missing.gml");
    expect_cli("compare --graph missing.gml --pattern causal", 1, 2, "missing.gml");
    expect_cli("pattern causal --labels-file missing.txt --out x.graphml", 1, 2,
               "missing.txt");
}
END_TEST

START_TEST(counts_of_one_are_singular)
{
    const char *g = tmp_path("one.graphml");
    char args[512];
    snprintf(args, sizeof args, "pattern cross:1,1 --out %s", g);
    expect_cli(args, 0, 1, "pattern 'cross:1,1' on 2 nodes: 1 edge -> ");
    snprintf(args, sizeof args, "run %s", g);
    expect_cli(args, 0, 1, "2 nodes, 1 edge, 1 message\n");
    expect_cli("run --pattern causal --nodes 1", 0, 1, "on 1 node: 1 message (");
    snprintf(args, sizeof args, "inspect %s --top 1", g);
    expect_cli(args, 0, 1, "the strongest edge (mean over heads)");
}
END_TEST

/* Mistakes a newcomer made: each once ran with a silent guess. */
START_TEST(newcomer_mistakes_are_named)
{
    /* a forgotten value is not filled with the next option */
    expect_cli("run graphs/sentence.gml --out --quiet", 2, 2,
               "option '--out' needs a value; '--quiet' is the next option");
    expect_cli("run graphs/sentence.gml --heads --quiet", 2, 2, "option '--heads' needs a value");
    expect_cli("run graphs/sentence.gml --directed --undirected", 2, 2,
               "give --directed or --undirected, not both");
    expect_cli("run graphs/sentence.gml --heads 3", 2, 2,
               "width D=16 (the default) is not a multiple of 3 heads");
    expect_cli("run graphs/sentence.gml --dim 10 --heads 4", 2, 2, "width D=10 (--dim)");
    expect_cli("run graphs/sentence.gml --features graphs/hopfield/x.npy --weights "
               "graphs/hopfield --seed 3", 2, 2, "--seed does not apply");
    expect_cli("run graphs/sentence.gml --q a.npy --k a.npy --v a.npy --seed 3", 2, 2,
               "--seed does not apply");
    expect_cli("help run extra", 2, 2, "unexpected argument 'extra' after 'help'");
    expect_cli("help draw heatmap", 0, 1, "attngraph draw heatmap");
    expect_cli("help lm sample", 0, 1, "usage: attngraph lm sample");
    expect_cli("help lm sample extra", 2, 2, "unexpected argument 'extra' after 'help'");
    expect_cli("--version x", 2, 2, "unexpected argument 'x'");
    expect_cli("--help run", 0, 1, "usage: attngraph run");
    expect_cli("run graphs/sentence.gml --save-rounds -", 2, 2, "--save-rounds names a directory");
    expect_cli("run --pattern causal --nodes 3 --edge-bias w", 2, 2,
               "a pattern has no edge attributes");
    /* an export over the limit is refused before the rounds, not after */
    expect_cli("run --pattern complete --nodes 3000 --dim 64 --rounds 1000 --attn x.csv "
               "--max-edges 5 --no-progress", 1, 2, "more than --max-edges 5");
}
END_TEST

Suite *options_suite(void)
{
    Suite *s = suite_create("options");
    TCase *tc = tcase_create("options");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, single_valued_options_given_twice_are_refused);
    tcase_add_test(tc, attn_repeats_to_write_several_formats);
    tcase_add_test(tc, abbreviations_name_the_options_they_could_mean);
    tcase_add_test(tc, options_that_do_not_apply_are_refused);
    tcase_add_test(tc, help_for_every_command);
    tcase_add_test(tc, every_command_lists_its_options_and_help);
    tcase_add_test(tc, messages_name_the_real_limits);
    tcase_add_test(tc, input_mistakes_say_what_is_wrong);
    tcase_add_test(tc, same_mistake_same_exit_code);
    tcase_add_test(tc, counts_of_one_are_singular);
    tcase_add_test(tc, newcomer_mistakes_are_named);
    suite_add_tcase(s, tc);
    return s;
}
