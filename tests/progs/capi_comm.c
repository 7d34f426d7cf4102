/*
 * capi_comm: a C program that communicates inside its backward through
 * the C API's communication scopes (gt_comm_begin/end, the header-only
 * shim), for tests/e2e/t_capi_comm.sh. Without libtorch or Python.
 *
 * Capture is off at first: a comm scope begun then and ended after
 * gt_capture_start records neither half. Then PASSES passes, each: a
 * module "layer" whose forward creates node 2p; a backward pass running
 * that node, inside which "all_reduce" holds a nested "inner" scope;
 * after the node, in the pass, a "wait" scope; an end of a scope never
 * begun (recorded by nobody). Then one "all_gather" in a forward, in no
 * pass. Times are spent with a busy loop so that every scope lasts at
 * least 1 us. Nothing on stdout. Exit 0.
 */
#include <stdint.h>
#include <time.h>

#include "gradtrace/gradtrace_shim.h"

#define PASSES 3

static void spin_us(long us)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

int main(void)
{
    uint32_t layer = gt_shim_intern("layer"), cls = gt_shim_intern("Block");
    uint32_t node = gt_shim_intern("MmBackward0");
    uint32_t ar = gt_shim_intern("all_reduce"), inner = gt_shim_intern("inner");
    uint32_t wait = gt_shim_intern("wait"), ag = gt_shim_intern("all_gather");
    uint32_t early = gt_shim_intern("early"), never = gt_shim_intern("never");

    gt_shim_comm_begin(early); /* capture off: not recorded */
    gt_shim_capture_start();
    gt_shim_comm_end(early);   /* its begin was not recorded */
    for (uint64_t p = 0; p < PASSES; p++) {
        gt_shim_module_begin(layer, cls);
        gt_shim_node_created(2 * p, 1);
        spin_us(20);
        gt_shim_module_end();
        gt_shim_bwd_pass_begin();
        gt_shim_bwd_node_begin(node, 2 * p, 1);
        spin_us(20);
        gt_shim_comm_begin(ar);
        spin_us(10);
        gt_shim_comm_begin(inner);
        spin_us(10);
        gt_shim_comm_end(inner);
        spin_us(10);
        gt_shim_comm_end(ar);
        spin_us(20);
        gt_shim_bwd_node_end(2 * p, 1);
        gt_shim_comm_begin(wait);
        spin_us(30);
        gt_shim_comm_end(wait);
        gt_shim_comm_end(never);
        gt_shim_bwd_pass_end();
        gt_shim_step(p);
    }
    gt_shim_module_begin(layer, cls);
    gt_shim_comm_begin(ag);
    spin_us(10);
    gt_shim_comm_end(ag);
    gt_shim_module_end();
    gt_shim_capture_stop();
    return 0;
}
