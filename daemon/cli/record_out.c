/*
 * What `gradtrace record` says once CMD has ended (record.c runs it): the
 * trace files, or why there are none, and the triggers whose layer no
 * process of the run ran, each with the module paths closest to it (from
 * the <pid>.layers files CMD's Python processes wrote into the seen-layers
 * directory). Everything goes to stderr, on a line of its own: CMD owns
 * stdout, and its last message on the shared stderr may lack its newline.
 */
#include "daemon/cli/record.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * Starts record's summary on a line of its own: the command's last
 * message on the shared stderr may lack its newline. A regular file shows
 * its last byte (read through /proc, as a redirection opens it write-only);
 * a terminal or pipe does not, so a newline goes first.
 */
static void fresh_line(void)
{
    struct stat st;
    char last = 0;
    int fd;

    fflush(stderr);
    if (fstat(STDERR_FILENO, &st) == 0 && S_ISREG(st.st_mode)) {
        last = '\n';
        fd = st.st_size > 0 ? open("/proc/self/fd/2", O_RDONLY | O_CLOEXEC) : -1;
        if (st.st_size > 0 && (fd < 0 || pread(fd, &last, 1, st.st_size - 1) != 1))
            last = 0;
        if (fd >= 0)
            close(fd);
    }
    if (last != '\n')
        fputc('\n', stderr);
}

/* Layer names of the run, as read from the seen-layers directory. */
struct seen {
    char **name;
    size_t n, cap;
    int files;
};

#define SEEN_MAX 100000
#define CLOSEST_N 3
/* Edit distances are computed on at most this many bytes of each name. */
#define DIST_MAX_LEN 160

static void seen_add(struct seen *s, const char *line, size_t len)
{
    char **nn;

    if (s->n == SEEN_MAX)
        return;
    if (s->n == s->cap) {
        nn = realloc(s->name, (s->cap ? s->cap * 2 : 256) * sizeof(*nn));
        if (!nn)
            return;
        s->name = nn;
        s->cap = s->cap ? s->cap * 2 : 256;
    }
    if ((s->name[s->n] = strndup(line, len)) != NULL)
        s->n++;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads and removes every <pid>.layers file, then the directory; the
 * names end up sorted and unique (ranks run the same model). */
static void seen_read(const char *dir, struct seen *s)
{
    char path[64 + 256 + 2], line[4096];
    struct dirent *e;
    DIR *d = opendir(dir);

    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        FILE *f;

        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (strstr(e->d_name, ".layers") && (f = fopen(path, "re")) != NULL) {
            s->files++;
            while (fgets(line, sizeof(line), f))
                seen_add(s, line, strcspn(line, "\n"));
            fclose(f);
        }
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
    if (s->n) {
        size_t k = 1;

        qsort(s->name, s->n, sizeof(*s->name), name_cmp);
        for (size_t i = 1; i < s->n; i++) {
            if (strcmp(s->name[i], s->name[k - 1]) == 0)
                free(s->name[i]);
            else
                s->name[k++] = s->name[i];
        }
        s->n = k;
    }
}

/* Levenshtein distance of the first DIST_MAX_LEN bytes of a and b. */
static unsigned edit_distance(const char *a, const char *b)
{
    unsigned row[DIST_MAX_LEN + 1];
    size_t la = strnlen(a, DIST_MAX_LEN), lb = strnlen(b, DIST_MAX_LEN);

    for (size_t j = 0; j <= lb; j++)
        row[j] = (unsigned)j;
    for (size_t i = 1; i <= la; i++) {
        unsigned diag = row[0];

        row[0] = (unsigned)i;
        for (size_t j = 1; j <= lb; j++) {
            unsigned up = row[j];
            unsigned best = diag + (a[i - 1] != b[j - 1]);

            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

int gt__record_unmatched(const char *seen_dir, const struct gt__trigger *trig,
                         size_t ntrig)
{
    struct seen s = {0};
    char spec[1024];
    int printed = 0;

    if (!seen_dir[0])
        return 0;
    seen_read(seen_dir, &s);
    for (size_t i = 0; s.n > 0 && i < ntrig; i++) {
        const char *layer = trig[i].layer;
        size_t best[CLOSEST_N];
        unsigned dist[CLOSEST_N];
        size_t nbest = 0, k;

        if (!layer[0])
            continue;
        for (k = 0; k < s.n && fnmatch(layer, s.name[k], 0) != 0; k++)
            ;
        if (k < s.n)
            continue; /* it matched a layer that ran */
        for (k = 0; k < s.n; k++) {
            unsigned dk = edit_distance(layer, s.name[k]);
            size_t at = nbest;

            while (at > 0 && dist[at - 1] > dk)
                at--;
            if (at == CLOSEST_N)
                continue;
            if (nbest < CLOSEST_N)
                nbest++;
            memmove(best + at + 1, best + at, (nbest - 1 - at) * sizeof(*best));
            memmove(dist + at + 1, dist + at, (nbest - 1 - at) * sizeof(*dist));
            best[at] = k;
            dist[at] = dk;
        }
        if (gt__trigger_format(&trig[i], spec, sizeof(spec)) < 0)
            snprintf(spec, sizeof(spec), "layer=%s", layer);
        if (!printed++)
            fresh_line();
        fprintf(stderr, "gradtrace: trigger %s matched no layer of the run; "
                "closest paths:", spec);
        for (k = 0; k < nbest; k++)
            fprintf(stderr, "%s %s", k ? "," : "", s.name[best[k]]);
        fputc('\n', stderr);
    }
    for (size_t k = 0; k < s.n; k++)
        free(s.name[k]);
    free(s.name);
    return printed > 0;
}

/*
 * Why no trace was written, from what is known: the command's exit
 * status, whether a second interrupt cut the wait, and how many of its
 * processes' streams the daemon saw (agents; -1 unknown). The agent is
 * blamed only when no process of the command loaded it.
 */
static void say_no_trace(int triggers, int status, int agents, int cut)
{
    const char *why;

    if (cut)
        why = "the wait was interrupted before the command's processes had "
              "recorded anything";
    else if (agents == 0 && (status == 126 || status == 127))
        why = "the command could not be run";
    else if (agents == 0)
        why = "no process of the command loaded the agent (statically linked "
              "programs, and programs that clear LD_PRELOAD, cannot)";
    else if (triggers)
        why = "no trigger opened a capture window";
    else if (status != 0)
        why = "the command ended before anything was recorded";
    else
        why = "the agent ran but recorded nothing (no layer, autograd node, "
              "NVTX range or GPU activity while capturing)";
    fprintf(stderr, "gradtrace: no trace written: %s\n", why);
}

void gt__record_print_files(const cJSON *files, int triggers, int fresh,
                            int status, int agents, int cut)
{
    const cJSON *f;
    int n = cJSON_GetArraySize(files);

    if (fresh)
        fresh_line();
    if (n == 0) {
        say_no_trace(triggers, status, agents, cut);
        return;
    }
    fprintf(stderr, "gradtrace: %d trace file%s:\n", n, n == 1 ? "" : "s");
    cJSON_ArrayForEach(f, files)
        if (cJSON_IsString(f))
            fprintf(stderr, "  %s\n", f->valuestring);
}
