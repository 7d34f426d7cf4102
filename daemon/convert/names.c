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

#include "common/alloc.h"

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

static int word_is(const char *w, size_t len, const char *lit)
{
    return len == strlen(lit) && strncmp(w, lit, len) == 0;
}

/* Drops a trailing ".py" (not the whole word). */
static void strip_py(const char *w, size_t *len)
{
    if (*len > 3 && strncmp(w + *len - 3, ".py", 3) == 0)
        *len -= 3;
}

/*
 * Skips a launcher's own options (torchrun, python -m torch.distributed.run
 * or .launch) to the training script or module it runs. "--opt=value" is
 * one word; the few options that take no value are listed; every other
 * option takes the next word as its value (--nproc_per_node 2).
 * @return the length of the script word at *w (basename, no .py), 0 when
 *         there is none.
 */
static size_t launcher_target(const char *s, size_t *pos, const char **w)
{
    static const char *const flags[] = {
        "--standalone", "--module", "-m", "--no-python", "--no_python",
        "--run-path", "--run_path", "--use-env", "--use_env",
        "--virtual-local-rank", "--virtual_local_rank",
    };
    size_t len;

    while ((len = next_word(s, pos, w)) > 0) {
        int flag = 0;

        if ((*w)[0] != '-') {
            word_basename(w, &len);
            strip_py(*w, &len);
            return len;
        }
        if (word_is(*w, len, "--"))
            continue;
        if (memchr(*w, '=', len))
            continue;
        for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
            flag |= word_is(*w, len, flags[i]);
        if (!flag && !next_word(s, pos, w))
            return 0;
    }
    return 0;
}

static int is_launcher(const char *w, size_t len)
{
    return word_is(w, len, "torch.distributed.run") ||
           word_is(w, len, "torch.distributed.launch") ||
           word_is(w, len, "torchrun");
}

/*
 * The script or module a python command line runs, past the interpreter's
 * own flags: single-letter flags may be grouped (-uB), -X and -W take a
 * value (attached, -Wignore, or the next word), -m names a module, -c and
 * "-" (stdin) name nothing (*code set for -c). @return its length at *w,
 * 0 for none.
 */
static size_t python_target(const char *s, size_t *pos, const char **w, int *code)
{
    size_t len;

    while ((len = next_word(s, pos, w)) > 0) {
        const char *a = *w;

        if (a[0] != '-') {
            word_basename(w, &len);
            strip_py(*w, &len);
            return len;
        }
        if (len == 1 || a[1] == '-')
            return 0; /* stdin, --version and the like */
        for (size_t i = 1; i < len; i++) {
            char c = a[i];

            if (c == 'c') {
                *code = 1;
                return 0;
            }
            if (c == 'm') {
                if (i + 1 < len) { /* -mpkg.mod */
                    *w = a + i + 1;
                    return len - i - 1;
                }
                return next_word(s, pos, w);
            }
            if (c == 'X' || c == 'W') {
                if (i + 1 == len && !next_word(s, pos, w))
                    return 0;
                break; /* the rest of the word is the value */
            }
        }
    }
    return 0;
}

int gt__command_is_code(const char *cmdline)
{
    size_t pos = 0, len;
    const char *w, *a;
    int code = 0;

    len = next_word(cmdline, &pos, &w);
    word_basename(&w, &len);
    if (len >= 6 && strncmp(w, "python", 6) == 0)
        (void)python_target(cmdline, &pos, &a, &code);
    return code;
}


size_t gt__command_name(const char *cmdline, char *out, size_t cap)
{
    size_t pos = 0;
    const char *w, *a;
    size_t len = next_word(cmdline, &pos, &w), alen = 0;
    int code = 0;

    word_basename(&w, &len);
    /* For "python3 train.py" the script says more than the interpreter;
     * for "python3 -m pkg.mod" the module does; for a launcher
     * (torchrun, -m torch.distributed.run) the training script it starts
     * does. "python3 -c ..." is "python3-c". */
    if (len >= 6 && strncmp(w, "python", 6) == 0)
        alen = python_target(cmdline, &pos, &a, &code);
    if (code) {
        char buf[GT__NAME_PART_MAX + 3];
        size_t n = len < GT__NAME_PART_MAX ? len : GT__NAME_PART_MAX;

        memcpy(buf, w, n);
        memcpy(buf + n, "-c", 2);
        return gt__sanitize_part(buf, n + 2, out, cap);
    }
    else if (is_launcher(w, len))
        alen = launcher_target(cmdline, &pos, &a);
    if (alen > 0 && is_launcher(a, alen)) {
        size_t p2 = pos;
        const char *t;
        size_t tlen = launcher_target(cmdline, &p2, &t);

        if (tlen > 0) {
            a = t;
            alen = tlen;
        }
    }
    if (alen > 0) {
        w = a;
        len = alen;
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

size_t gt__trace_ext_len(const char *path)
{
    size_t n = strlen(path), k = sizeof(GT__TRACE_EXT) - 1;
    if (n > k && strcmp(path + n - k, GT__TRACE_EXT) == 0)
        return k;
    if (n > 5 && strcmp(path + n - 5, ".json") == 0)
        return 5;
    return 0;
}

int gt__path_restem(char **p, const char *from, const char *to)
{
    size_t fl = strlen(from), tl = strlen(to);
    char *n;

    if (!*p || strncmp(*p, from, fl) != 0 || ((*p)[fl] != '.' && (*p)[fl] != '-'))
        return 0;
    n = gt__malloc(tl + strlen(*p + fl) + 1);
    if (!n)
        return -ENOMEM;
    memcpy(n, to, tl);
    strcpy(n + tl, *p + fl);
    gt__free(*p);
    *p = n;
    return 1;
}
