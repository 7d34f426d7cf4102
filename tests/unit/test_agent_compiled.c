/*
 * Compiled graphs in the agent (agent/compiled.c through the C API,
 * include/gradtrace/gradtrace.h): the map is recorded with or without
 * capture and numbered from 1; regions are recorded only while
 * capturing, nest, and end once per begin; a capture that stops or
 * restarts inside a region records no stray end. Without libtorch in the
 * process no RecordFunction callback can be added: regions still work.
 * Each Criterion test runs in its own process.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "agent/capture.h"
#include "agent/ring.h"
#include "gradtrace/gradtrace.h"
#include "gradtrace/wire.h"

#define MAXREC 64

struct got {
    uint16_t type[MAXREC];
    uint8_t rec[MAXREC][64];
    int n;
};

/* Every record the calling thread committed since the last call. */
static void take(struct got *g)
{
    struct gt__thread *t = gt__thread_self();
    const uint8_t *p;
    uint32_t n;

    g->n = 0;
    cr_assert_not_null(t);
    while ((n = gt__ring_peek(t, &p)) > 0) {
        for (uint32_t off = 0; off < n;) {
            uint16_t type, size = gt__rec_size_at(p + off);
            memcpy(&type, p + off, 2);
            cr_assert_geq(size, 4);
            if (g->n < MAXREC && size <= 64) {
                g->type[g->n] = type;
                memcpy(g->rec[g->n], p + off, size);
                g->n++;
            }
            off += size;
        }
        gt__ring_consume(t, n);
    }
}

static int count(const struct got *g, uint16_t type)
{
    int c = 0;
    for (int i = 0; i < g->n; i++)
        c += g->type[i] == type;
    return c;
}

Test(agent_compiled, map_is_recorded_without_capture)
{
    struct got g;
    struct gt_r_compiled_graph gr;
    struct gt_r_compiled_call cc;

    gt__ring_configure(4, 4);
    cr_assert_not(gt_capture_active());
    uint32_t a = gt_compiled_graph(gt_intern("k1"), gt_intern("0/0"), 0, 1, 0, 2);
    gt_compiled_call(a, 0, gt_intern("cpp_fused_0"), gt_intern("graph_0_cpp_fused_0"),
                     gt_intern("blocks.0"), 0, 1, 0);
    gt_compiled_call(a, 1, gt_intern("extern_kernels.addmm"), gt_intern("aten::addmm"),
                     gt_intern(""), gt_intern("a b"), 1, 0x1 | 0x2);
    uint32_t b = gt_compiled_graph(gt_intern("k2"), 0, UINT32_MAX, 2, 1, 0);
    cr_assert_eq(a, 1, "maps are numbered from 1");
    cr_assert_eq(b, 2);
    cr_assert_eq(gt_compiled_graph(1, 0, 0, 0, 0, 0), 0, "phase 0 refused");
    cr_assert_eq(gt_compiled_graph(1, 0, 0, 4, 0, 0), 0, "phase 4 refused");
    gt_compiled_call(a, 2, 1, 0, 0, 0, 9, 0); /* bad phase: nothing */
    take(&g);
    cr_assert_eq(count(&g, GT_R_COMPILED_GRAPH), 2);
    cr_assert_eq(count(&g, GT_R_COMPILED_CALL), 2);
    for (int i = 0; i < g.n; i++)
        if (g.type[i] == GT_R_COMPILED_GRAPH) {
            memcpy(&gr, g.rec[i], sizeof(gr));
            cr_assert_eq(gr.h.size, sizeof(gr));
            if (gr.graph == 2) {
                cr_assert_eq(gr.phase, 2);
                cr_assert_eq(gr.flags, GT_COMPILED_F_CACHED);
                cr_assert_eq(gr.graph_id, UINT32_MAX);
            } else {
                cr_assert_eq(gr.calls, 2);
            }
        } else if (g.type[i] == GT_R_COMPILED_CALL) {
            memcpy(&cc, g.rec[i], sizeof(cc));
            cr_assert_eq(cc.graph, 1);
            if (cc.index == 1) {
                cr_assert_eq(cc.flags, GT_CCALL_EXTERN | GT_CCALL_FUSED);
                cr_assert_neq(cc.owner, 0, "the empty path is a string, not 0");
                cr_assert_neq(cc.fused, 0);
            }
        }
}

Test(agent_compiled, regions_only_while_capturing)
{
    struct got g;
    struct gt_r_compiled_region r;

    gt__ring_configure(4, 4);
    uint32_t m = gt_compiled_graph(gt_intern("k"), 0, 0, 1, 0, 0);
    take(&g);
    gt_compiled_begin(m);
    gt_compiled_end(m);
    take(&g);
    cr_assert_eq(g.n, 0, "idle: no region recorded");

    gt_capture_start();
    gt_module_begin(gt_intern("blocks.1"), 0);
    gt_compiled_begin(m);
    gt_compiled_begin(m); /* nested */
    gt_compiled_end(m);
    gt_compiled_end(m);
    gt_compiled_end(m); /* one too many: ignored */
    gt_module_end();
    take(&g);
    cr_assert_eq(count(&g, GT_R_COMPILED_BEGIN), 2);
    cr_assert_eq(count(&g, GT_R_COMPILED_END), 2);
    for (int i = 0; i < g.n; i++)
        if (g.type[i] == GT_R_COMPILED_BEGIN) {
            memcpy(&r, g.rec[i], sizeof(r));
            cr_assert_eq(r.graph, m);
            cr_assert_eq(r.layer, gt_intern("blocks.1"),
                         "the begin names the module open around it");
        }
    gt_capture_stop();
}

Test(agent_compiled, a_restarted_capture_ends_no_stale_region)
{
    struct got g;

    gt__ring_configure(4, 4);
    uint32_t m = gt_compiled_graph(gt_intern("k"), 0, 0, 2, 0, 0);
    gt_capture_start();
    gt_compiled_begin(m);
    gt_capture_stop();
    gt_capture_start(); /* a new epoch */
    gt_compiled_end(m);
    gt_compiled_begin(m); /* the depth is back to 0: records again */
    gt_compiled_end(m);
    take(&g);
    cr_assert_eq(count(&g, GT_R_COMPILED_BEGIN), 2);
    cr_assert_eq(count(&g, GT_R_COMPILED_END), 1,
                 "the end of the earlier capture's region is not recorded");
    gt_capture_stop();
}

Test(agent_compiled, compile_span_recorded_without_capture)
{
    struct got g;
    struct gt_r_compile_span s;

    gt__ring_configure(4, 4);
    gt_compile_span(gt_intern("compile 0/0"), 100, 250);
    gt_compile_span(gt_intern("x"), 300, 200); /* ends before it begins */
    take(&g);
    cr_assert_eq(count(&g, GT_R_COMPILE_SPAN), 1);
    memcpy(&s, g.rec[g.n - 1], sizeof(s));
    cr_assert_eq(s.begin_ns, 100);
    cr_assert_eq(s.end_ns, 250);
}

Test(agent_compiled, layer_info_recorded_without_capture)
{
    struct got g;
    struct gt_r_layer_info r;
    uint32_t id = gt_intern("Net"), cls = gt_intern("Net");

    gt__ring_configure(4, 4);
    gt_layer_info(id, cls, GT_LAYER_F_BARE_ROOT | 0x80u);
    gt_layer_info(0, cls, 0); /* no name: nothing */
    take(&g);
    cr_assert_eq(count(&g, GT_R_LAYER_INFO), 1);
    memcpy(&r, g.rec[g.n - 1], sizeof(r));
    cr_assert_eq(r.layer, id);
    cr_assert_eq(r.cls, cls);
    cr_assert_eq(r.flags, GT_LAYER_F_BARE_ROOT, "unknown flags are dropped");
}
