/*
 * The capture state (agent/capture.c) and the API's version query
 * (gt_api_version, include/gradtrace/gradtrace.h).
 */
#include <criterion/criterion.h>

#include "agent/capture.h"
#include "gradtrace/gradtrace.h"
#include "gradtrace/gradtrace_shim.h"

Test(agent_api, version_is_the_headers)
{
    cr_assert_eq(gt_api_version(), GT_API_VERSION);
    cr_assert_eq(gt_api_version() / 1000, GT_API_VERSION_MAJOR);
    cr_assert_eq(gt_api_version() % 1000, GT_API_VERSION_MINOR);
    cr_assert_eq(GRADTRACE_API_VERSION, GT_API_VERSION_MAJOR);
}

Test(agent_api, shim_wraps_the_version_query)
{
    /* This binary links the agent statically, so dlsym does not see it:
     * the shim must report "no agent" as 0, never another version. */
    unsigned v = gt_shim_api_version();

    cr_assert(v == 0 || v == GT_API_VERSION, "shim returned %u", v);
    cr_assert_eq(v != 0, gt_shim_agent_present());
}

Test(agent_capture, each_start_is_one_new_epoch)
{
    uint32_t e0 = gt__capture_epoch();

    cr_assert_not(gt__capture_on());
    gt__capture_set(1, 0);
    cr_assert(gt__capture_on());
    cr_assert(gt_capture_active());
    cr_assert_eq(gt__capture_epoch(), e0 + 1);
    gt__capture_set(1, 0); /* already on: nothing changes */
    cr_assert_eq(gt__capture_epoch(), e0 + 1);
    gt__capture_set(0, 0);
    cr_assert_not(gt__capture_on());
    cr_assert_eq(gt__capture_epoch(), e0 + 1, "stopping keeps the epoch");
    gt_capture_start();
    cr_assert_eq(gt__capture_epoch(), e0 + 2);
    gt_capture_stop();
    cr_assert_not(gt_capture_active());
}

Test(agent_capture, triggers_bit_is_independent_of_capture)
{
    cr_assert_not(gt__capture_hooks());
    gt__capture_arm(1);
    cr_assert(gt__capture_triggers());
    cr_assert(gt__capture_hooks());
    cr_assert_not(gt__capture_on());
    gt__capture_set(1, 0);
    cr_assert(gt__capture_triggers(), "a start keeps the armed bit");
    gt__capture_arm(0);
    cr_assert_not(gt__capture_triggers());
    cr_assert(gt__capture_on(), "disarming keeps capture on");
    cr_assert(gt__capture_hooks());
    gt__capture_set(0, 0);
    cr_assert_not(gt__capture_hooks());
}

Test(agent_capture, hooks_wanted_while_capturing_or_armed)
{
    cr_assert_not(gt_hooks_wanted(), "idle: module hooks not wanted");
    gt__capture_arm(1);
    cr_assert(gt_hooks_wanted(), "an armed trigger follows module scopes");
    gt__capture_arm(0);
    cr_assert_not(gt_hooks_wanted());
    gt_capture_start();
    cr_assert(gt_hooks_wanted());
    gt_capture_stop();
    cr_assert_not(gt_hooks_wanted());
}

Test(agent_capture, pass_count_restarts_with_each_capture)
{
    gt__capture_set(1, 0);
    cr_assert_eq(gt__capture_pass_next(), 0);
    cr_assert_eq(gt__capture_pass_next(), 1);
    cr_assert_eq(gt__capture_passes(), 2);
    gt__capture_set(0, 0);
    cr_assert_eq(gt__capture_passes(), 2, "kept until the next start");
    gt__capture_set(1, 0);
    cr_assert_eq(gt__capture_passes(), 0);
    gt__capture_set(0, 0);
}

Test(agent_capture, counted_request_begins_at_a_boundary_and_ends_itself)
{
    gt__capture_request(3, 10, 0);
    cr_assert_not(gt__capture_on(), "waits for the next boundary");
    cr_assert(gt__capture_pending());
    cr_assert(gt_hooks_wanted(), "hooks wanted while it waits");
    gt__capture_boundary(10); /* no boundary: the same iteration */
    cr_assert_not(gt__capture_on());
    gt__capture_boundary(11);
    cr_assert(gt__capture_on(), "iteration 11 is the first captured");
    cr_assert_not(gt__capture_pending());
    gt__capture_boundary(12);
    gt__capture_boundary(13);
    cr_assert(gt__capture_on(), "11 and 12 done, 13 running");
    gt__capture_boundary(14);
    cr_assert_not(gt__capture_on(), "three iterations: 11, 12, 13");
    gt__capture_boundary(15);
    cr_assert_not(gt__capture_on());
}

Test(agent_capture, plain_request_runs_until_stopped)
{
    gt__capture_request(0, 4, 0);
    gt__capture_boundary(5);
    cr_assert(gt__capture_on());
    gt__capture_boundary(50);
    cr_assert(gt__capture_on(), "no count: runs on");
    gt_capture_stop();
    cr_assert_not(gt__capture_on());
}

Test(agent_capture, request_without_iterations_starts_at_once)
{
    gt__capture_request(2, 0, 1);
    cr_assert(gt__capture_on());
    gt__capture_boundary(1);
    cr_assert(gt__capture_on());
    gt__capture_boundary(2);
    cr_assert_not(gt__capture_on(), "two iterations, from the start");
}

Test(agent_capture, stop_drops_a_waiting_request)
{
    gt__capture_request(3, 7, 0);
    gt_capture_stop();
    cr_assert_not(gt__capture_pending());
    gt__capture_boundary(8);
    cr_assert_not(gt__capture_on(), "a stopped request never begins");
}
