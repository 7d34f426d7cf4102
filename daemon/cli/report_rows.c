/*
 * Which rows of the per-layer table a report shows and what they add up
 * to (report.h): the figures every output (report_out.c, report_svg.c)
 * and the hints (hints.c) read the same way, so a total line, a share
 * and a hint's evidence always agree. Below all of them; reads a
 * finished table and keeps nothing.
 */
#include <cjson/cJSON.h>
#include <string.h>

#include "daemon/cli/report.h"

int gt__report_shown(const struct gt__agg_layer *l, const struct gt__rep_opts *o)
{
    return o->depth < 0 || l->depth <= o->depth;
}

struct gt__rep_totals gt__report_totals(const struct gt__agg *r)
{
    struct gt__rep_totals t = {0};
    for (size_t i = 0; i < r->n; i++) {
        const struct gt__agg_layer *l = &r->layers[i];
        t.accg_us += l->accg_us;
        t.comm_us += l->comm_us;
        if (l->up >= 0)
            continue;
        t.fwd_us += l->fwd_us;
        t.fwd_comm_us += l->fwd_comm_us;
        t.rc_us += l->rc_us;
        t.bwd_us += l->bwd_us;
        t.nodes += l->bwd_nodes;
    }
    t.bwd_us += r->rest.un_us;
    t.nodes += r->rest.un_nodes;
    /* The pass totals count every node's; rows only their own. */
    if (r->rest.comm_us > t.comm_us) {
        t.comm_un_us = r->rest.comm_us - t.comm_us;
        t.comm_us = r->rest.comm_us;
    }
    t.step_us = r->step_us;
    if (r->steps)
        t.rest_us = t.step_us - t.fwd_us - t.rc_us - t.bwd_us - t.comm_us -
                    t.fwd_comm_us;
    return t;
}

double gt__report_share(const struct gt__agg *r, const struct gt__agg_layer *l)
{
    if (!r->steps || r->step_us <= 0)
        return -1;
    return (l->fwd_us + l->rc_us + l->bwd_us) / r->step_us;
}

int gt__report_compiled_totals(struct gt__agg *r, const struct cJSON *args,
                               double ts)
{
    static const char *const keys[5] = {"region_us", "one_layer_us", "fused_us",
                                        "unowned_us", "unmatched_us"};
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(args, "phase");
    double us[5];
    for (int i = 0; i < 5; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, keys[i]);
        us[i] = cJSON_IsNumber(v) ? v->valuedouble : 0;
    }
    gt__agg_compiled(r, cJSON_IsString(ph) && strcmp(ph->valuestring, "backward") == 0,
                     us, ts);
    return 0;
}
