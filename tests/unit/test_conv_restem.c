/*
 * Renaming a stream's files when its rank arrives late (gt__conv_restem,
 * used by the daemon when a GT_R_PROCESS_INFO after the hello names the
 * rank: torch.multiprocessing.spawn): files already written take the new
 * stem, later files (window files, the rest of the main trace) are named
 * by it, and the finished files are valid where the listing says.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/conv_fixture.h"

static void process_info(struct conv_fx *f, int32_t rank)
{
    struct gt_r_process_info r = {{GT_R_PROCESS_INFO, sizeof(r)}, 4242, 1, rank,
                                  rank, 2, 0, 0, T0, 1700000000000000000ull};
    add(f, &r, sizeof(r));
}

Test(conv_restem, late_rank_renames_written_files, .timeout = 10)
{
    struct conv_fx f;
    const char *const *paths;
    char want_main[128], want_win[128];
    struct gt_r_window b = {{GT_R_WINDOW_BEGIN, sizeof(b)}, 1, 1, 0, T0 + 300000, 0};
    struct gt_r_window e = {{GT_R_WINDOW_END, sizeof(e)}, 1, 1, 0, T0 + 320000, 0};
    struct gt_r_window d = {{GT_R_WINDOW_DONE, sizeof(d)}, 1, 1, 0, T0 + 330000, 0};

    memset(&f, 0, sizeof(f));
    strcpy(f.dir, "/tmp/gt-restem.XXXXXX");
    cr_assert_not_null(mkdtemp(f.dir));
    struct gt__conv_opts o = {.out_dir = f.dir, .stem = "train-pid4242"};
    f.c = gt__conv_create(&o);
    cr_assert_not_null(f.c);
    fx_hello(&f, 4242, -1, -1, -1, "python3 train.py");
    cr_assert_eq(gt__conv_rank(f.c), -1);
    str(&f, 1, "layer=blocks.1,phase=forward");
    str(&f, 2, "before");
    thr(&f, 100);
    user_scope(&f, 2, 100, 120);
    feed(&f);
    cr_assert_eq(gt__conv_files(f.c, &paths), 1, "the main file is open");

    process_info(&f, 1);
    feed(&f);
    cr_assert_eq(gt__conv_rank(f.c), 1, "the stream's rank is the later record's");
    cr_assert_eq(gt__conv_restem(f.c, "train-rank1-pid4242"), 0);
    snprintf(want_main, sizeof(want_main), "%s/train-rank1-pid4242.pt.trace.json", f.dir);
    cr_assert_eq(gt__conv_files(f.c, &paths), 1);
    cr_assert_str_eq(paths[0], want_main);
    cr_assert_eq(access(want_main, F_OK), 0, "renamed on disk");

    str(&f, 3, "after");
    thr(&f, 100);
    add(&f, &b, sizeof(b));
    user_scope(&f, 3, 305, 310);
    add(&f, &e, sizeof(e));
    add(&f, &d, sizeof(d));
    user_scope(&f, 3, 400, 410);
    feed(&f);
    cr_assert_eq(gt__conv_finish(f.c, NULL, 0), 0);
    cr_assert_eq(gt__conv_files(f.c, &paths), 2);
    snprintf(want_win, sizeof(want_win), "%s/train-rank1-pid4242-w1-", f.dir);
    cr_assert(strncmp(paths[1], want_win, strlen(want_win)) == 0,
              "a later window file has the new stem: %s", paths[1]);
    cJSON *doc = load(want_main);
    int before = 0, after = 0;
    cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(doc, "traceEvents")) {
        before += s_of(ev, "name") && strcmp(s_of(ev, "name"), "before") == 0;
        after += s_of(ev, "name") && strcmp(s_of(ev, "name"), "after") == 0;
    }
    cJSON_Delete(doc);
    cr_assert_eq(before, 1, "written before the rename");
    cr_assert_eq(after, 1, "and after it, in the same file");
    fx_close(&f);
}
