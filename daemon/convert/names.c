/*
 * File names from untrusted agent text.
 *
 * Output paths are always <output dir>/<stem>.<ext> where the daemon builds
 * the stem from the agent's hello. Instead of trying to recognise
 * dangerous input ("../", "/", NUL, control bytes, over-long names), every
 * part goes through a whitelist: only [A-Za-z0-9._-] survive, a leading
 * '.' or '-' and any run of dots are neutralised, and the length is capped. A part
 * built this way can never name a directory other than the output one,
 * never be hidden, and never be empty.
 */
#include "daemon/convert/names.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int safe_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

size_t gt__sanitize_part(const char *in, size_t len, char *out, size_t cap)
{
    size_t max = cap - 1 < GT__NAME_PART_MAX ? cap - 1 : GT__NAME_PART_MAX;
    size_t n = 0;

    for (size_t i = 0; i < len && n < max; i++) {
        unsigned char c = (unsigned char)in[i];

        if (!safe_char(c))
            c = '_';
        /* A dot may neither start the name (hidden file, "..") nor follow
         * another dot, so ".." cannot appear anywhere. */
        if (c == '.' && (n == 0 || out[n - 1] == '.'))
            c = '_';
        /* Nor may a dash start it: "-rf" would read as options to the
         * tools users run on the file. */
        if (c == '-' && n == 0)
            c = '_';
        out[n++] = (char)c;
    }
    if (n == 0) {
        snprintf(out, cap, "unknown");
        return strlen(out);
    }
    out[n] = '\0';
    return n;
}

/* Basename of the word [p, p+len): the part after the last '/'. */
static void word_basename(const char **p, size_t *len)
{
    for (size_t i = *len; i > 0; i--) {
        if ((*p)[i - 1] == '/') {
            *p += i;
            *len -= i;
            return;
        }
    }
}

/* Next space-separated word at or after *pos; len 0 when none. */
static size_t next_word(const char *s, size_t *pos, const char **w)
{
    size_t i = *pos;
    size_t start;

    while (s[i] == ' ')
        i++;
    start = i;
    while (s[i] && s[i] != ' ')
        i++;
    *w = s + start;
    *pos = i;
    return i - start;
}

size_t gt__command_name(const char *cmdline, char *out, size_t cap)
{
    size_t pos = 0;
    const char *w;
    size_t len = next_word(cmdline, &pos, &w);

    word_basename(&w, &len);
    /* For "python3 train.py" the script says more than the interpreter;
     * for "python3 -m pkg.mod" the module does. Other options keep the
     * interpreter's name, since guessing their arguments is fragile. */
    if (len >= 6 && strncmp(w, "python", 6) == 0) {
        const char *a;
        size_t alen = next_word(cmdline, &pos, &a);

        if (alen == 2 && strncmp(a, "-m", 2) == 0)
            alen = next_word(cmdline, &pos, &a);
        else if (alen > 0 && a[0] == '-')
            alen = 0;
        if (alen > 0) {
            word_basename(&a, &alen);
            if (alen > 3 && strncmp(a + alen - 3, ".py", 3) == 0)
                alen -= 3;
            if (alen > 0) {
                w = a;
                len = alen;
            }
        }
    }
    return gt__sanitize_part(w, len, out, cap);
}

int gt__agent_stem(const char *cmdline, int32_t rank, uint32_t pid, char *out,
                   size_t cap)
{
    char cmd[GT__NAME_PART_MAX + 1];
    int n;

    gt__command_name(cmdline, cmd, sizeof(cmd));
    if (rank >= 0)
        n = snprintf(out, cap, "%s-rank%d-pid%u", cmd, (int)rank, (unsigned)pid);
    else
        n = snprintf(out, cap, "%s-pid%u", cmd, (unsigned)pid);
    if (n < 0 || (size_t)n >= cap)
        return -ENAMETOOLONG;
    return n;
}
