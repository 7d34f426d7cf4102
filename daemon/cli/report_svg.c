/*
 * `gradtrace report --svg FILE` (report.h): one horizontal bar per row
 * shown (the same rows as the table, after --depth and --top), forward,
 * backward and recompute stacked, with the layer's path as its label, a
 * millisecond scale with grid lines and a legend. Plain SVG 1.1 text
 * with no script, font file, stylesheet or image outside the file, so it
 * opens anywhere and renders the same in a browser and in rsvg-convert.
 *
 * Every row has a light track across the plot, so a layer with no time
 * still has its place; the test (tests/e2e/t_report_svg.sh) counts those
 * tracks in the rendered picture.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "daemon/cli/report.h"

#define ROW_H 20
#define BAR_H 14
#define TOP 56
#define PLOT_W 640
#define CHAR_W 7.2
#define COL_FWD "#4e79a7"
#define COL_BWD "#f28e2b"
#define COL_RC "#59a14f"
#define COL_TRACK "#eeeeee"

/* Text with &, <, > and " escaped. The table's names are valid UTF-8
 * without controls already (agg.h); of what XML 1.0 forbids, that leaves
 * the noncharacters U+FFFE and U+FFFF, which become '?'. */
static void put_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if ((unsigned char)s[0] == 0xef && (unsigned char)s[1] == 0xbf &&
            ((unsigned char)s[2] == 0xbe || (unsigned char)s[2] == 0xbf)) {
            fputc('?', f);
            s += 2;
            continue;
        }
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* A tick step of 1, 2 or 5 times a power of ten giving about 5 ticks. */
static double tick_step(double max)
{
    double raw = max / 5, p = pow(10, floor(log10(raw)));
    double m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

static void svg_scale(FILE *f, double x0, double max_ms, size_t rows)
{
    double step = tick_step(max_ms), y1 = TOP + (double)rows * ROW_H;
    for (double v = 0; v <= max_ms * 1.0001; v += step) {
        double x = x0 + v / max_ms * PLOT_W;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\" "
                   "stroke=\"#cccccc\" stroke-width=\"1\"/>\n",
                x, TOP - 4, x, y1);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n",
                x, TOP - 8, v);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%d\">ms (forward, backward, recompute "
               "stacked; inclusive of sub-layers)</text>\n", x0, 16);
    static const struct { const char *name, *col; } legend[] = {
        {"forward", COL_FWD}, {"backward", COL_BWD}, {"recompute", COL_RC}};
    for (int i = 0; i < 3; i++) {
        double x = x0 + i * 110;
        fprintf(f, "<rect x=\"%.1f\" y=\"24\" width=\"12\" height=\"10\" "
                   "fill=\"%s\"/><text x=\"%.1f\" y=\"33\">%s</text>\n",
                x, legend[i].col, x + 16, legend[i].name);
    }
}

static void svg_bar(FILE *f, const struct gt__agg_layer *l, size_t k, double x0,
                    double max_ms, int indent)
{
    double y = TOP + (double)k * ROW_H + (ROW_H - BAR_H) / 2.0;
    double seg[3] = {l->fwd_us / 1e3, l->bwd_us / 1e3, l->rc_us / 1e3};
    static const char *const col[3] = {COL_FWD, COL_BWD, COL_RC};
    double x = x0;
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", 4.0 + (indent ? 2 * CHAR_W * l->depth : 0),
            y + BAR_H - 3);
    put_text(f, l->path);
    fputs("</text>\n", f);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"%s\"/>\n",
            x0, y, PLOT_W, BAR_H, COL_TRACK);
    for (int i = 0; i < 3; i++) {
        double w = seg[i] / max_ms * PLOT_W;
        if (w <= 0)
            continue;
        fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" "
                   "fill=\"%s\"><title>", x, y, w, BAR_H, col[i]);
        put_text(f, l->path);
        fprintf(f, " %s %.3f ms</title></rect>\n",
                i == 0 ? "forward" : i == 1 ? "backward" : "recompute", seg[i]);
        x += w;
    }
}

int gt__report_write_svg(const char *path, const struct gt__agg *r,
                         const struct gt__rep_opts *o)
{
    size_t rows = 0, label = 8;
    double max_ms = 0;
    int indent = o->order == GT__AGG_MODEL;
    for (size_t i = 0; i < r->n && (o->top < 0 || (long)rows < o->top); i++) {
        const struct gt__agg_layer *l = &r->layers[i];
        if (!gt__report_shown(l, o))
            continue;
        size_t len = strlen(l->path) + (indent ? 2 * (size_t)l->depth : 0);
        label = len > label ? (len < 80 ? len : 80) : label;
        double t = (l->fwd_us + l->bwd_us + l->rc_us) / 1e3;
        max_ms = t > max_ms ? t : max_ms;
        rows++;
    }
    if (max_ms <= 0)
        max_ms = 1;
    max_ms = ceil(max_ms / tick_step(max_ms)) * tick_step(max_ms);
    FILE *f = fopen(path, "w");
    if (!f)
        return -errno;
    double x0 = 12 + CHAR_W * (double)label;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" "
               "width=\"%.0f\" height=\"%zu\" font-family=\"monospace\" "
               "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
               "fill=\"#ffffff\"/>\n",
            x0 + PLOT_W + 24, TOP + rows * ROW_H + 16);
    svg_scale(f, x0, max_ms, rows);
    size_t k = 0;
    for (size_t i = 0; i < r->n && k < rows; i++)
        if (gt__report_shown(&r->layers[i], o))
            svg_bar(f, &r->layers[i], k++, x0, max_ms, indent);
    fputs("</svg>\n", f);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return -EIO;
    return 0;
}
