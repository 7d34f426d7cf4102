/*
 * Job-wide triggers in the agent: a GT_CTL_JOB_TRIGGER from the daemon is
 * kept for the Python side (gt_job_trigger_take), not armed; gt_trigger_arm
 * arms a spec as the daemon's trigger would; gt_now_ns is the agent clock.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/control.h"
#include "agent/stream.h"
#include "agent/trigger.h"
#include "gradtrace/gradtrace.h"
#include "gradtrace/wire.h"

static void send_ctl(int fd, uint16_t type, const char *text)
{
    uint8_t msg[GT_CTL_MAX_SIZE];
    size_t n = strlen(text);
    struct gt_ctl h = {GT_CTL_MAGIC, type, (uint16_t)(sizeof(h) + n)};
    memcpy(msg, &h, sizeof(h));
    memcpy(msg + sizeof(h), text, n);
    cr_assert_eq(write(fd, msg, sizeof(h) + n), (ssize_t)(sizeof(h) + n));
}

Test(agent_jobtrig, daemon_message_waits_for_python_unarmed, .timeout = 10)
{
    int sv[2];
    char buf[256];
    struct gt__trig_info before, after;

    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    gt__st.fd = sv[0];
    cr_assert_eq(gt_job_trigger_take(buf, sizeof(buf)), 0, "nothing pending");
    gt__trig_info(&before);
    send_ctl(sv[1], GT_CTL_JOB_TRIGGER, "layer=old,phase=backward");
    send_ctl(sv[1], GT_CTL_JOB_TRIGGER, "layer=blocks.1,phase=backward,iteration=next");
    gt__control_drain();
    gt__trig_info(&after);
    cr_assert_eq(after.armed, before.armed, "a job trigger is not armed by the daemon's word");
    cr_assert_eq(gt_job_trigger_take(buf, 8), -ENOSPC);
    cr_assert_eq(gt_job_trigger_take(buf, sizeof(buf)), 44, "the newest one");
    cr_assert_str_eq(buf, "layer=blocks.1,phase=backward,iteration=next");
    cr_assert_eq(gt_job_trigger_take(buf, sizeof(buf)), 0, "taken once");
    gt__st.fd = -1;
    close(sv[0]);
    close(sv[1]);
}

Test(agent_jobtrig, python_arms_a_spec_for_an_iteration)
{
    struct gt__trig_info before, after;

    gt__trig_info(&before);
    cr_assert_eq(gt_trigger_arm("layer=blocks.2,iteration=7"), 0);
    gt__trig_info(&after);
    cr_assert_eq(after.armed, before.armed + 1);
    cr_assert_lt(gt_trigger_arm("layer="), 0, "a bad spec is refused");
    cr_assert_eq(gt_trigger_arm(NULL), -EINVAL);
    cr_assert_eq(gt_iteration(), gt__trig_iteration());
    uint64_t a = gt_now_ns(), b = gt_now_ns();
    cr_assert(a > 0 && b >= a);
}
