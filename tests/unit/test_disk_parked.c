/*
 * daemon/server/diskfull.c: streams that end while the disk is full are
 * held for the sweep, at most GT__DISK_PARKED_MAX at once (agents are
 * untrusted: a flood of short streams must not hold converters without
 * bound), and shutdown frees every one still held.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <errno.h>
#include <stdlib.h>

#include "daemon/server/server.h"

Test(disk_parked, held_streams_are_capped, .init = cr_redirect_stderr)
{
    struct gt__server *s = calloc(1, sizeof(*s));
    struct gt__framer_stats st = {0};

    cr_assert_not_null(s);
    for (unsigned i = 0; i < GT__DISK_PARKED_MAX; i++)
        cr_assert_eq(gt__disk_park(s, NULL, &st, 0, 100 + i, i, "t"), 0, "stream %u", i);
    cr_assert_eq(s->nparked, GT__DISK_PARKED_MAX);
    cr_assert_eq(gt__disk_park(s, NULL, &st, 0, 999, 999, "t"), -EBUSY,
                 "past the cap a stream is not held");
    cr_assert_eq(s->nparked, GT__DISK_PARKED_MAX);
    /* out_dir "" cannot be statted: the disk counts as still full, so
     * shutdown leaves each unfinished (said in the log) and frees it. */
    gt__disk_parked_close_all(s);
    cr_assert_eq(s->nparked, 0);
    cr_assert_null(s->parked);
    free(s);
}
