/*
 * `gradtrace report` on a merged trace (`gradtrace merge`): the clock
 * alignment its metadata holds ("merge":{...}), printed after the table,
 * one line per rank: how its clock was put on the reference's, the
 * offset, and how far it can be trusted. Kept as the parsed line until
 * printed; a report reads few merged traces, so a short list suffices.
 */
#include <stdio.h>
#include <string.h>

#include <cJSON.h>

#include "common/util.h"
#include "daemon/cli/report.h"

#define MAX_MERGED 16

static cJSON *merged[MAX_MERGED];
static int nmerged;

void gt__report_note_merge(const char *line)
{
    const char *obj = strchr(line, '{');
    const char *end = obj ? strrchr(obj, '}') : NULL;
    cJSON *j;
    if (!end || nmerged == MAX_MERGED)
        return;
    /* The line is "merge":{...}}} (it closes the gradtrace object too):
     * parse the longest prefix that is one object. */
    j = cJSON_ParseWithLength(obj, (size_t)(end - obj) + 1);
    while (!j && end > obj) {
        while (--end > obj && *end != '}')
            ;
        j = cJSON_ParseWithLength(obj, (size_t)(end - obj) + 1);
    }
    if (j)
        merged[nmerged++] = j;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

void gt__report_print_clock(FILE *f)
{
    for (int i = 0; i < nmerged; i++) {
        const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(merged[i], "ranks"), *r;
        fprintf(f, "\nclock alignment (merged trace, reference rank %.0f):\n",
                num(merged[i], "reference_rank"));
        cJSON_ArrayForEach(r, ranks)
        {
            const cJSON *m = cJSON_GetObjectItemCaseSensitive(r, "method");
            const cJSON *h = cJSON_GetObjectItemCaseSensitive(r, "host");
            double u = num(r, "uncertainty_ns");
            char host[256], method[32];
            /* The trace is untrusted: text only reaches the terminal. */
            snprintf(host, sizeof(host), "%s", cJSON_IsString(h) ? h->valuestring : "?");
            snprintf(method, sizeof(method), "%s", cJSON_IsString(m) ? m->valuestring : "?");
            gt__text_clean(host);
            gt__text_clean(method);
            fprintf(f, "  rank %-4.0f host %-16s %-12s correction %+12.3f us  ",
                    num(r, "rank"), host, method, num(r, "correction_ns") / 1e3);
            if (u < 0)
                fprintf(f, "uncertainty unknown (realtime only)");
            else
                fprintf(f, "+/- %.3f us", u / 1e3);
            fprintf(f, "  (%.0f collectives matched)\n", num(r, "collectives_matched"));
        }
    }
}

void gt__report_clock_close(void)
{
    for (int i = 0; i < nmerged; i++)
        cJSON_Delete(merged[i]);
    nmerged = 0;
}
