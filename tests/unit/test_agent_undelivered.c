/*
 * Per-thread counts of records the daemon may not have (agent/undelivered.c):
 * chunks free their counts when acknowledged, a connection that ends
 * counts what is left, counts are cumulative over the process and re-sent
 * in every stream, and the bounds err on "lost".
 */
#include <criterion/criterion.h>

#include "agent/undelivered.h"

static uint64_t got[8][2];
static int ngot;

static void take(uint32_t tid, uint64_t count)
{
    cr_assert_lt(ngot, 8);
    got[ngot][0] = tid;
    got[ngot][1] = count;
    ngot++;
}

static void emit(void)
{
    ngot = 0;
    gt__undel_emit(take);
}

static uint64_t of(uint32_t tid)
{
    for (int i = 0; i < ngot; i++)
        if (got[i][0] == tid)
            return got[i][1];
    return UINT64_MAX;
}

Test(agent_undelivered, acked_chunks_are_free_the_rest_counted_per_thread)
{
    gt__undel_forget();
    gt__undel_add(11, 5);
    gt__undel_add(12, 7);
    gt__undel_add(11, 1);
    gt__undel_chunk_sent(1);
    gt__undel_add(12, 3);
    gt__undel_chunk_sent(2);
    gt__undel_chunk_sent(3); /* strings only: nothing to count */
    gt__undel_add(11, 4);
    gt__undel_chunk_sent(4);
    gt__undel_acked(2);
    emit();
    cr_assert_eq(ngot, 0, "nothing is lost while the connection lives");
    gt__undel_connection_lost();
    emit();
    cr_assert_eq(ngot, 1);
    cr_assert_eq(of(11), 4);
    emit();
    cr_assert_eq(ngot, 0, "reported once per stream");
    gt__undel_stream_reset();
    gt__undel_add(12, 9);
    gt__undel_chunk_lost();
    gt__undel_discarded(13, 2);
    emit();
    cr_assert_eq(ngot, 3, "a new stream hears every count again");
    cr_assert_eq(of(11), 4);
    cr_assert_eq(of(12), 9);
    cr_assert_eq(of(13), 2);
}

Test(agent_undelivered, a_full_ring_merges_into_its_newest_slot)
{
    gt__undel_forget();
    for (uint64_t i = 1; i <= GT__UNDEL_SLOTS + 10; i++) {
        gt__undel_add(21, 1);
        gt__undel_chunk_sent(i);
    }
    /* The last slot holds 11 chunks: acknowledged only all together. */
    gt__undel_acked(GT__UNDEL_SLOTS + 5);
    gt__undel_connection_lost();
    emit();
    cr_assert_eq(of(21), 11, "a partly acknowledged merged slot counts whole");
}

static uint64_t sum_all;

static void add_all(uint32_t tid, uint64_t count)
{
    (void)tid;
    sum_all += count;
}

Test(agent_undelivered, threads_past_the_pair_bound_are_still_counted)
{
    gt__undel_forget();
    for (uint32_t t = 1; t <= GT__UNDEL_PAIRS + 3; t++)
        gt__undel_add(100 + t, 1);
    gt__undel_chunk_lost();
    sum_all = 0;
    gt__undel_emit(add_all);
    cr_assert_eq(sum_all, GT__UNDEL_PAIRS + 3, "every record counted");
}
