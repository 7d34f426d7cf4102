/*
 * The per-layer table's outputs (report.h): the text table, CSV and JSON
 * (schema/report.md). All three show the same rows with the same
 * numbers: the rows under --depth, at most --top of them, then the
 * remainder no layer owns, the total, the step time outside layer spans
 * and, for the table and JSON, the hints.
 *
 * Per-iteration columns (n, mean, p50, p95) are a layer's forward +
 * recompute + backward time in each iteration it ran in (agg_iter.c); a
 * container's forward (and the recompute of a row not recomputed itself)
 * in an iteration is its children's, as in its totals.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <cJSON.h>

#include "daemon/cli/report.h"

/* The per-iteration statistic a row shows, or NULL (none). */
static const struct gt__agg_stat *row_stat(const struct gt__agg_layer *l)
{
    if (!l->it || l->it->st[GT__AGG_ST_ALL].n == 0)
        return NULL;
    return &l->it->st[GT__AGG_ST_ALL];
}

/* Index of the last row shown, plus one: --top counts shown rows. */
static size_t rows_end(const struct gt__agg *r, const struct gt__rep_opts *o)
{
    long shown = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (!gt__report_shown(&r->layers[i], o))
            continue;
        if (o->top >= 0 && shown == o->top)
            return i;
        shown++;
    }
    return r->n;
}

/* ------------------------------------------------------------ csv */

/* One CSV field (RFC 4180): quoted, with any quote doubled, when it holds
 * a comma, a quote or a line break (names come from the agent), or when
 * always is set. */
static void csv_field(FILE *f, const char *s, int always)
{
    if (!always && !strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void csv_row(FILE *f, const struct gt__agg *r, const struct gt__agg_layer *l)
{
    const struct gt__agg_stat *st = row_stat(l);
    double share = gt__report_share(r, l);
    csv_field(f, l->path, 0);
    fputc(',', f);
    csv_field(f, l->cls ? l->cls : "", 0);
    fprintf(f, ",%llu,%.3f,%llu,%.3f,%llu,%llu,%.3f,%.3f,%llu,%.3f,"
               "%.3f,%llu,",
            (unsigned long long)l->fwd_calls,
            l->fwd_us / 1e3, (unsigned long long)l->bwd_spans, l->bwd_us / 1e3,
            (unsigned long long)l->bwd_nodes, (unsigned long long)l->rc_calls,
            l->rc_us / 1e3, l->bwd_self_us / 1e3,
            (unsigned long long)l->bwd_self_nodes, l->accg_us / 1e3,
            l->bwd_wall_us / 1e3, (unsigned long long)l->order2);
    csv_field(f, l->up >= 0 ? r->layers[l->up].path : "", 0);
    fprintf(f, ",%d,%d,", l->depth, l->container);
    if (share >= 0)
        fprintf(f, "%.4f", share);
    if (st)
        fprintf(f, ",%llu,%.3f,%.3f,%.3f,", (unsigned long long)st->n,
                gt__agg_mean(st) / 1e3, gt__agg_quantile(st, 0.5) / 1e3,
                gt__agg_quantile(st, 0.95) / 1e3);
    else
        fputs(",0,,,,", f);
    /* Node names hold "::" and "<>", never commas or quotes, unless the
     * agent is hostile; quoted anyway. */
    if (l->top_node) {
        csv_field(f, l->top_node, 1);
        fprintf(f, ",%.3f,", l->top_node_us / 1e3);
    } else
        fputs(",,", f);
    fprintf(f, "%.3f,%.3f,%llu,", l->gpu_us[0] / 1e3, l->gpu_us[1] / 1e3,
            (unsigned long long)l->gpu_kernels);
    if (r->nranks > 1 && l->rank_mean_us > 0)
        fprintf(f, "%d,%.3f,", (int)l->slow_rank, l->slow_us / l->rank_mean_us);
    else
        fputs(",,", f);
    /* Kernel names may hold commas (template arguments): quoted, with
     * any quote doubled. */
    int k = gt__agg_top_kernel(l);
    if (k >= 0) {
        csv_field(f, l->bk_name[k], 1);
        fprintf(f, ",%.3f", l->bk_us[k] / 1e3);
    } else {
        fputs(",", f);
    }
    fprintf(f, ",%.3f,%.3f\n", l->comm_us / 1e3, l->fwd_comm_us / 1e3);
}

void gt__report_print_csv(FILE *f, const struct gt__agg *r,
                          const struct gt__rep_opts *o)
{
    fputs("layer,class,fwd_calls,fwd_ms,bwd_spans,bwd_ms,bwd_nodes,"
          "recompute_calls,recompute_ms,bwd_self_ms,bwd_self_nodes,"
          "accumulate_grad_ms,bwd_wall_ms,second_order_nodes,parent,depth,"
          "container,share,iterations,iter_mean_ms,iter_p50_ms,iter_p95_ms,"
          "top_node,top_node_ms,gpu_fwd_ms,gpu_bwd_ms,gpu_kernels,slowest_rank,"
          "rank_imbalance,top_bwd_kernel,top_bwd_kernel_ms,comm_ms,fwd_comm_ms\n", f);
    size_t end = rows_end(r, o);
    for (size_t i = 0; i < end; i++)
        if (gt__report_shown(&r->layers[i], o))
            csv_row(f, r, &r->layers[i]);
    struct gt__rep_totals t = gt__report_totals(r);
    fprintf(f, "(unattributed),,0,0.000,0,%.3f,%llu,0,0.000,%.3f,%llu,0.000,"
               "0.000,0,,0,0,,0,,,,,,,,,,,,,%.3f,0.000\n",
            r->rest.un_us / 1e3, (unsigned long long)r->rest.un_nodes,
            r->rest.un_us / 1e3, (unsigned long long)r->rest.un_nodes,
            t.comm_un_us / 1e3);
    fprintf(f, "(total),,0,%.3f,0,%.3f,%llu,0,%.3f,0.000,0,%.3f,0.000,%llu,,0,"
               "0,,%llu,,,,,,,,,,,,,%.3f,%.3f\n",
            t.fwd_us / 1e3, t.bwd_us / 1e3, (unsigned long long)t.nodes,
            t.rc_us / 1e3, t.accg_us / 1e3, (unsigned long long)r->rest.order2,
            (unsigned long long)r->steps, t.comm_us / 1e3, t.fwd_comm_us / 1e3);
    if (r->steps)
        fprintf(f, "(rest of step),,0,%.3f,0,0.000,0,0,0.000,0.000,0,0.000,"
                   "0.000,0,,0,0,,%llu,,,,,,,,,,,,,0.000,0.000\n",
                t.rest_us / 1e3, (unsigned long long)r->steps);
}

/* ------------------------------------------------------------ table */

/* What the table divides its ms by: the iterations (per iteration, the
 * default), or 1 (--totals, or no iterations). */
static double per_it(const struct gt__agg *r, const struct gt__rep_opts *o)
{
    return !o->totals && r->steps ? (double)r->steps : 1;
}

static void table_row(FILE *f, const struct gt__agg *r,
                      const struct gt__agg_layer *l, int w, int indent,
                      double k, int comm)
{
    char ratio[16] = "-", calls[24] = "-", name[128], share[16] = "-";
    char itn[24] = "-", p50[24] = "-", p95[24] = "-";
    const struct gt__agg_stat *st = row_stat(l);
    int d = indent ? 2 * (l->depth < 8 ? l->depth : 8) : 0;
    double sh = gt__report_share(r, l);

    if (l->fwd_us > 0 && l->bwd_spans)
        snprintf(ratio, sizeof(ratio), "%.2f", l->bwd_us / l->fwd_us);
    if (!l->container)
        snprintf(calls, sizeof(calls), "%llu", (unsigned long long)l->fwd_calls);
    if (sh >= 0)
        snprintf(share, sizeof(share), "%.1f", 100 * sh);
    if (st) {
        snprintf(itn, sizeof(itn), "%llu", (unsigned long long)st->n);
        snprintf(p50, sizeof(p50), "%.3f", gt__agg_quantile(st, 0.5) / 1e3);
        snprintf(p95, sizeof(p95), "%.3f", gt__agg_quantile(st, 0.95) / 1e3);
    }
    snprintf(name, sizeof(name), "%*s%s", d, "", l->path);
    fprintf(f, "%-*.*s  %-14.14s %6s %11.3f %5llu %9.3f %11.3f %11.3f %9llu "
               "%8s %10.3f %6s %5s %9s %9s",
            w, w, name, l->cls ? l->cls : "", calls, l->fwd_us / 1e3 / k,
            (unsigned long long)l->rc_calls, l->rc_us / 1e3 / k,
            l->bwd_us / 1e3 / k, l->bwd_self_us / 1e3 / k,
            (unsigned long long)l->bwd_nodes, ratio, l->accg_us / 1e3 / k,
            share, itn, p50, p95);
    /* The communication column only when there was some. */
    if (comm)
        fprintf(f, " %11.3f %11.3f", l->fwd_comm_us / 1e3 / k,
                l->comm_us / 1e3 / k);
    /* GPU columns only when the input has CUDA data. */
    if (r->gpu_kernels)
        fprintf(f, " %10.3f %10.3f", l->gpu_us[0] / 1e3 / k,
                l->gpu_us[1] / 1e3 / k);
    if (r->nranks > 1 && l->rank_mean_us > 0)
        fprintf(f, "  r%-4d %5.2fx", (int)l->slow_rank, l->slow_us / l->rank_mean_us);
    else if (r->nranks > 1)
        fputs("  -", f);
    fputc('\n', f);
}

/* The iterations line: how many, ms per iteration, and what was left out. */
static void table_iterations(FILE *f, const struct gt__agg *r, int comm)
{
    fprintf(f, "%llu iterations, %.3f ms per iteration on average (p50 %.3f, "
               "p95 %.3f); step = total fwd + rc + bwd%s + (rest of step)\n",
            (unsigned long long)r->steps, r->step_us / 1e3 / (double)r->steps,
            gt__agg_quantile(&r->step_st, 0.5) / 1e3,
            gt__agg_quantile(&r->step_st, 0.95) / 1e3, comm ? " + comm" : "");
    if (r->ops_detail == GT__OPS_OFF)
        fputs("operators: not captured (the default; gradtrace record --ops, or a "
              "trigger's ops=1, records them)\n", f);
    else if (r->ops_detail == GT__OPS_WINDOWS)
        fputs("operators: captured in the windows that asked for them (ops=1)\n", f);
    else if (r->ops_detail == GT__OPS_ALL)
        fputs("operators: captured (--ops)\n", f);
    if (!r->skipped)
        return;
    fputs("warm-up left out: ", f);
    for (size_t i = 0; i < r->nskip && i < 6; i++)
        fprintf(f, "%sProfilerStep#%llu", i ? ", " : "",
                (unsigned long long)r->skip[i]);
    fprintf(f, "%s (%.3f ms%s, far above the median iteration); "
               "--include-warmup keeps %s\n",
            r->nskip > 6 ? ", ..." : "", r->skipped_us / 1e3,
            r->skipped > 1 ? " together" : "", r->skipped > 1 ? "them" : "it");
}

/* Per phase, where compiled regions' time went (their "compiled
 * totals"): operators of one layer, fused into a common ancestor, of no
 * module, matched to no call, and the rest of the region (the wrapper's
 * own Python, between the operators). */
static void table_compiled(FILE *f, const struct gt__agg *r, double k)
{
    static const char *const ph[2] = {"forward", "backward"};
    for (int p = 0; p < 2; p++) {
        const struct gt__agg_compiled *c = &r->compiled[p];
        double all = c->us[GT__AGG_C_REGION];
        if (!c->regions || all <= 0)
            continue;
        double ops = c->us[GT__AGG_C_ONE] + c->us[GT__AGG_C_FUSED] +
                     c->us[GT__AGG_C_UNOWNED] + c->us[GT__AGG_C_UNMATCHED];
        double rest = all > ops ? all - ops : 0;
        fprintf(f, "torch.compile %s: %.3f ms in %llu compiled run%s: %.1f %% "
                   "in one layer, %.1f %% fused (a common ancestor's row), "
                   "%.1f %% in no module, %.1f %% unmatched, %.1f %% between "
                   "kernels\n",
                ph[p], all / 1e3 / k, (unsigned long long)c->regions,
                c->regions == 1 ? "" : "s",
                100 * c->us[GT__AGG_C_ONE] / all,
                100 * c->us[GT__AGG_C_FUSED] / all,
                100 * c->us[GT__AGG_C_UNOWNED] / all,
                100 * c->us[GT__AGG_C_UNMATCHED] / all, 100 * rest / all);
    }
}

static void table_footer(FILE *f, const struct gt__agg *r, int w, double k,
                         int comm)
{
    struct gt__rep_totals t = gt__report_totals(r);
    fprintf(f, "%-*s  %-14s %6s %11s %5s %9s %11.3f %11.3f %9llu", w,
            "(unattributed)", "", "", "", "", "", r->rest.un_us / 1e3 / k,
            r->rest.un_us / 1e3 / k, (unsigned long long)r->rest.un_nodes);
    if (comm)
        fprintf(f, " %8s %10s %6s %5s %9s %9s %11s %11.3f", "", "", "", "", "",
                "", "", t.comm_un_us / 1e3 / k);
    fputc('\n', f);
    fprintf(f, "%-*s  %-14s %6s %11.3f %5s %9.3f %11.3f %11s %9llu %8s %10.3f",
            w, "total", "", "", t.fwd_us / 1e3 / k, "", t.rc_us / 1e3 / k,
            t.bwd_us / 1e3 / k, "", (unsigned long long)t.nodes, "",
            t.accg_us / 1e3 / k);
    if (comm)
        fprintf(f, " %6s %5s %9s %9s %11.3f %11.3f", "", "", "", "",
                t.fwd_comm_us / 1e3 / k, t.comm_us / 1e3 / k);
    fputc('\n', f);
    if (r->steps) {
        fprintf(f, "%-*s  %-14s %6s %11.3f\n", w, "(rest of step)", "", "",
                t.rest_us / 1e3 / k);
        table_iterations(f, r, comm);
    }
    table_compiled(f, r, k);
    fprintf(f, "ms %s; times are inclusive of sub-layers; bwd ms sums the "
               "layer's node times\n(self ms: its own nodes); counts are "
               "totals; containers (fwd n -) show their children's sums;\n"
               "total = top-level rows + (unattributed); share: %% of the "
               "iterations' time; it n, p50, p95:\nper-iteration fwd+rc+bwd ms",
            k > 1 ? "per iteration (--totals: summed)" : "summed over the iterations");
    if (comm)
        fputs(";\nfwd comm, bwd comm: communication (torch.distributed calls, "
              "DDP's reducer) in its\nforward calls (inclusive, not in fwd ms) "
              "and in its own backward nodes (not in bwd ms)", f);
    if (r->gpu_kernels)
        fputs(";\ngpu ms: kernels tagged with the layer and phase, inclusive", f);
    if (r->nranks > 1)
        fprintf(f, ";\n%u ranks summed; slowest rank: its fwd+rc+bwd / the ranks' "
                   "mean", r->nranks);
    if (r->rest.un_accg || r->rest.order2)
        fprintf(f, ";\n%llu AccumulateGrad nodes without a layer (input leaves), "
                   "%llu nodes made by backward (second order)",
                (unsigned long long)r->rest.un_accg,
                (unsigned long long)r->rest.order2);
    fputc('\n', f);
}

static void hints_print(FILE *f, const struct gt__agg *r)
{
    struct gt__hint h[GT__MAX_HINTS];
    size_t n = gt__hints_find(r, h, GT__MAX_HINTS);
    fputs("\nhints:\n", f);
    if (n == 0)
        fputs("  none: nothing in this trace stands out\n", f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "  [%s] %s%s%s\n", h[i].kind, h[i].layer,
                h[i].layer[0] ? ": " : "", h[i].text);
}

void gt__report_print_table(FILE *f, const struct gt__agg *r,
                            const struct gt__rep_opts *o)
{
    int w = 14, indent = o->order == GT__AGG_MODEL;
    size_t end = rows_end(r, o);
    double k = per_it(r, o);
    const char *u = k > 1 ? "/it" : "";
    char h[7][16];
    struct gt__rep_totals tt = gt__report_totals(r);
    int comm = tt.comm_us > 0 || tt.fwd_comm_us > 0;

    for (size_t i = 0; i < end; i++) {
        const struct gt__agg_layer *l = &r->layers[i];
        int len = (int)strlen(l->path) + (indent ? 2 * (l->depth < 8 ? l->depth : 8) : 0);
        if (gt__report_shown(l, o) && len > w)
            w = len < 60 ? len : 60;
    }
    static const char *const ms[7] = {"fwd ms", "rc ms", "bwd ms", "self ms",
                                      "accg ms", "fwd comm", "bwd comm"};
    for (int i = 0; i < 7; i++)
        snprintf(h[i], sizeof(h[i]), "%s%s", ms[i], u);
    fprintf(f, "%-*s  %-14s %6s %11s %5s %9s %11s %11s %9s %8s %10s %6s %5s %9s %9s",
            w, "layer", "class", "fwd n", h[0], "rc n", h[1], h[2], h[3],
            "bwd nodes", "bwd/fwd", h[4], "share", "it n", "p50 ms", "p95 ms");
    if (comm)
        fprintf(f, " %11s %11s", h[5], h[6]);
    if (r->gpu_kernels)
        fprintf(f, " %10s %10s", k > 1 ? "gpu fwd/it" : "gpu fwd ms",
                k > 1 ? "gpu bwd/it" : "gpu bwd ms");
    if (r->nranks > 1)
        fputs("  slowest rank", f);
    fputc('\n', f);
    for (size_t i = 0; i < end; i++)
        if (gt__report_shown(&r->layers[i], o))
            table_row(f, r, &r->layers[i], w, indent, k, comm);
    table_footer(f, r, w, k, comm);
    if (!o->no_hints)
        hints_print(f, r);
}

/* ------------------------------------------------------------ json */

static cJSON *stat_json(const struct gt__agg_stat *s)
{
    cJSON *j = cJSON_CreateObject();
    if (!j)
        return NULL;
    cJSON_AddNumberToObject(j, "n", (double)s->n);
    cJSON_AddNumberToObject(j, "mean_ms", gt__agg_mean(s) / 1e3);
    cJSON_AddNumberToObject(j, "stddev_ms", gt__agg_stddev(s) / 1e3);
    cJSON_AddNumberToObject(j, "p50_ms", s->n ? gt__agg_quantile(s, 0.5) / 1e3 : 0);
    cJSON_AddNumberToObject(j, "p95_ms", s->n ? gt__agg_quantile(s, 0.95) / 1e3 : 0);
    return j;
}

static void add_num_or_null(cJSON *o, const char *k, double v, int have)
{
    if (have)
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

static cJSON *per_iter_json(const struct gt__agg_layer *l)
{
    static const char *const keys[GT__AGG_NST] = {"fwd", "bwd", "recompute", "all"};
    if (!l->it)
        return cJSON_CreateNull();
    cJSON *j = cJSON_CreateObject();
    for (int s = 0; j && s < GT__AGG_NST; s++)
        cJSON_AddItemToObject(j, keys[s], stat_json(&l->it->st[s]));
    return j;
}

static cJSON *layer_json(const struct gt__agg *r, const struct gt__agg_layer *l)
{
    cJSON *j = cJSON_CreateObject();
    double sh = gt__report_share(r, l);
    if (!j)
        return NULL;
    cJSON_AddStringToObject(j, "path", l->path);
    add_num_or_null(j, "depth", l->depth, 1);
    if (l->cls)
        cJSON_AddStringToObject(j, "class", l->cls);
    else
        cJSON_AddNullToObject(j, "class");
    if (l->up >= 0)
        cJSON_AddStringToObject(j, "parent", r->layers[l->up].path);
    else
        cJSON_AddNullToObject(j, "parent");
    cJSON_AddBoolToObject(j, "container", l->container);
    cJSON_AddNumberToObject(j, "fwd_calls", (double)l->fwd_calls);
    cJSON_AddNumberToObject(j, "fwd_ms", l->fwd_us / 1e3);
    cJSON_AddNumberToObject(j, "recompute_calls", (double)l->rc_calls);
    cJSON_AddNumberToObject(j, "recompute_ms", l->rc_us / 1e3);
    cJSON_AddNumberToObject(j, "bwd_spans", (double)l->bwd_spans);
    cJSON_AddNumberToObject(j, "bwd_ms", l->bwd_us / 1e3);
    cJSON_AddNumberToObject(j, "bwd_self_ms", l->bwd_self_us / 1e3);
    cJSON_AddNumberToObject(j, "bwd_nodes", (double)l->bwd_nodes);
    cJSON_AddNumberToObject(j, "bwd_self_nodes", (double)l->bwd_self_nodes);
    cJSON_AddNumberToObject(j, "accumulate_grad_ms", l->accg_us / 1e3);
    cJSON_AddNumberToObject(j, "comm_ms", l->comm_us / 1e3);
    cJSON_AddNumberToObject(j, "fwd_comm_ms", l->fwd_comm_us / 1e3);
    int ranked = r->nranks > 1 && l->rank_mean_us > 0;
    add_num_or_null(j, "slowest_rank", l->slow_rank, ranked);
    add_num_or_null(j, "rank_imbalance", ranked ? l->slow_us / l->rank_mean_us : 0,
                    ranked);
    cJSON_AddNumberToObject(j, "gpu_fwd_ms", l->gpu_us[0] / 1e3);
    cJSON_AddNumberToObject(j, "gpu_bwd_ms", l->gpu_us[1] / 1e3);
    cJSON_AddNumberToObject(j, "gpu_kernels", (double)l->gpu_kernels);
    int k = gt__agg_top_kernel(l);
    if (k >= 0)
        cJSON_AddStringToObject(j, "top_bwd_kernel", l->bk_name[k]);
    else
        cJSON_AddNullToObject(j, "top_bwd_kernel");
    cJSON_AddNumberToObject(j, "top_bwd_kernel_ms", k >= 0 ? l->bk_us[k] / 1e3 : 0);
    if (l->top_node)
        cJSON_AddStringToObject(j, "top_node", l->top_node);
    else
        cJSON_AddNullToObject(j, "top_node");
    cJSON_AddNumberToObject(j, "top_node_ms", l->top_node_us / 1e3);
    add_num_or_null(j, "bwd_fwd_ratio", l->fwd_us > 0 ? l->bwd_us / l->fwd_us : 0,
                    l->fwd_us > 0 && l->bwd_spans);
    add_num_or_null(j, "share", sh, sh >= 0);
    cJSON_AddItemToObject(j, "per_iteration", per_iter_json(l));
    return j;
}

static cJSON *summary_json(const struct gt__agg *r)
{
    struct gt__rep_totals t = gt__report_totals(r);
    cJSON *j = cJSON_CreateObject(), *u, *tot, *in;
    if (!j)
        return NULL;
    u = cJSON_AddObjectToObject(j, "unattributed");
    cJSON_AddNumberToObject(u, "bwd_ms", r->rest.un_us / 1e3);
    cJSON_AddNumberToObject(u, "bwd_nodes", (double)r->rest.un_nodes);
    cJSON_AddNumberToObject(u, "accumulate_grad_nodes", (double)r->rest.un_accg);
    cJSON_AddNumberToObject(u, "comm_ms", t.comm_un_us / 1e3);
    tot = cJSON_AddObjectToObject(j, "total");
    cJSON_AddNumberToObject(tot, "fwd_ms", t.fwd_us / 1e3);
    cJSON_AddNumberToObject(tot, "recompute_ms", t.rc_us / 1e3);
    cJSON_AddNumberToObject(tot, "bwd_ms", t.bwd_us / 1e3);
    cJSON_AddNumberToObject(tot, "bwd_nodes", (double)t.nodes);
    cJSON_AddNumberToObject(tot, "accumulate_grad_ms", t.accg_us / 1e3);
    cJSON_AddNumberToObject(tot, "comm_ms", t.comm_us / 1e3);
    cJSON_AddNumberToObject(tot, "fwd_comm_ms", t.fwd_comm_us / 1e3);
    cJSON_AddNumberToObject(tot, "second_order_nodes", (double)r->rest.order2);
    static const char *const cph[2] = {"forward", "backward"};
    static const char *const ckey[5] = {"region_ms", "one_layer_ms", "fused_ms",
                                        "unowned_ms", "unmatched_ms"};
    cJSON *cj = cJSON_AddObjectToObject(j, "compiled");
    for (int p = 0; cj && p < 2; p++) {
        const struct gt__agg_compiled *c = &r->compiled[p];
        cJSON *o = cJSON_AddObjectToObject(cj, cph[p]);
        cJSON_AddNumberToObject(o, "runs", (double)c->regions);
        for (int i = 0; i < 5; i++)
            cJSON_AddNumberToObject(o, ckey[i], c->us[i] / 1e3);
    }
    cJSON *it = cJSON_AddObjectToObject(j, "iterations");
    cJSON_AddNumberToObject(it, "count", (double)r->steps);
    cJSON_AddNumberToObject(it, "total_ms", r->step_us / 1e3);
    add_num_or_null(it, "rest_ms", t.rest_us / 1e3, r->steps > 0);
    cJSON_AddItemToObject(it, "duration", stat_json(&r->step_st));
    cJSON *lo = cJSON_AddObjectToObject(it, "left_out");
    cJSON_AddNumberToObject(lo, "count", (double)r->skipped);
    cJSON_AddNumberToObject(lo, "total_ms", r->skipped_us / 1e3);
    cJSON *ls = cJSON_AddArrayToObject(lo, "steps");
    for (size_t i = 0; ls && r->skipped && i < r->nskip; i++)
        cJSON_AddItemToArray(ls, cJSON_CreateNumber((double)r->skip[i]));
    in = cJSON_AddObjectToObject(j, "input");
    cJSON_AddNumberToObject(in, "lost_events", (double)r->lost_events);
    cJSON_AddNumberToObject(in, "lost_chunks", (double)r->lost_chunks);
    cJSON_AddNumberToObject(in, "corrupt_chunks", (double)r->corrupt_chunks);
    cJSON_AddNumberToObject(in, "truncated_inputs", (double)r->truncated);
    {
        static const char *const ops[] = {"unknown", "off", "windows", "all"};
        int d = r->ops_detail >= 0 && r->ops_detail <= GT__OPS_ALL ? r->ops_detail : 0;
        cJSON_AddStringToObject(in, "operators", ops[d]);
    }
    cJSON_AddNumberToObject(in, "late_spans", (double)r->late);
    return j;
}

static cJSON *hints_json(const struct gt__agg *r)
{
    struct gt__hint h[GT__MAX_HINTS];
    size_t n = gt__hints_find(r, h, GT__MAX_HINTS);
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o)
            break;
        cJSON_AddStringToObject(o, "kind", h[i].kind);
        cJSON_AddStringToObject(o, "layer", h[i].layer);
        cJSON_AddStringToObject(o, "text", h[i].text);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

int gt__report_print_json(FILE *f, const struct gt__agg *r,
                          const struct gt__rep_opts *o)
{
    int rc = -ENOMEM;
    cJSON *doc = summary_json(r), *rows;
    char *text = NULL;
    size_t end = rows_end(r, o);

    if (!doc)
        return -ENOMEM;
    cJSON_AddStringToObject(doc, "schema", "gradtrace-report/1");
    if (!(rows = cJSON_AddArrayToObject(doc, "layers")))
        goto out_free;
    for (size_t i = 0; i < end; i++)
        if (gt__report_shown(&r->layers[i], o))
            cJSON_AddItemToArray(rows, layer_json(r, &r->layers[i]));
    cJSON_AddItemToObject(doc, "hints", hints_json(r));
    if (!(text = cJSON_Print(doc)))
        goto out_free;
    fputs(text, f);
    fputc('\n', f);
    rc = 0;
out_free:
    cJSON_free(text);
    cJSON_Delete(doc);
    return rc;
}
