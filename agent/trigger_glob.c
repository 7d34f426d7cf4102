/*
 * A trigger's layer glob against a module path (agent/trigger.h):
 * fnmatch on the whole path, or with_ancestors on any of its dotted
 * prefixes ("layers.17" matches inside "layers.17.mlp"); an application
 * index after a name ("blocks[3]") is literal.
 */
#include <ctype.h>
#include <fnmatch.h>
#include <string.h>

#include "agent/trigger.h"

/* An application index ("blocks[3]": '[' right after a name character,
 * digits, ']') is literal, not a bracket expression: the i-th application
 * of a layer applied with stacked parameters (schema/torch.md,
 * "Applications"); "blocks[*]" is any of them. "blocks.[12]" (after a
 * dot) stays a class. Writes the
 * pattern with such brackets escaped into out (cap bytes). @return out, or
 * glob itself when it has none or does not fit. */
static const char *literal_indices(const char *glob, char *out, size_t cap)
{
    size_t o = 0;
    int any = 0;
    for (size_t i = 0; glob[i]; i++) {
        const char *c = &glob[i];
        if (*c == '[' && i > 0 && (isalnum((unsigned char)c[-1]) || c[-1] == '_') &&
            (isdigit((unsigned char)c[1]) || c[1] == '*')) {
            size_t k = 1;
            if (c[1] == '*')
                k = 2; /* "blocks[*]": every application */
            else
                while (isdigit((unsigned char)c[k]))
                    k++;
            if (c[k] == ']') {
                if (o + k + 3 >= cap)
                    return glob;
                out[o++] = '\\';
                memcpy(out + o, c, k);
                o += k;
                out[o++] = '\\';
                out[o++] = ']';
                i += k;
                any = 1;
                continue;
            }
        }
        if (o + 2 >= cap)
            return glob;
        out[o++] = *c;
    }
    out[o] = '\0';
    return any ? out : glob;
}

int gt__trig_glob_match(const char *glob, const char *path, size_t len,
                        int with_ancestors)
{
    char buf[GT_STRING_MAX + 1], pat[2 * GT_STRING_MAX + 2];

    if (len > GT_STRING_MAX)
        len = GT_STRING_MAX;
    memcpy(buf, path, len);
    buf[len] = '\0';
    glob = literal_indices(glob, pat, sizeof(pat));
    if (fnmatch(glob, buf, 0) == 0)
        return 1;
    if (!with_ancestors)
        return 0;
    for (size_t i = len; i-- > 0;) {
        if (buf[i] != '.')
            continue;
        buf[i] = '\0';
        if (fnmatch(glob, buf, 0) == 0)
            return 1;
    }
    return 0;
}
