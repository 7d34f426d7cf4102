/*
 * A trigger's layer glob against a module path (agent/trigger.h):
 * fnmatch on the whole path, or with_ancestors on any of its dotted
 * prefixes ("layers.17" matches inside "layers.17.mlp").
 */
#include <fnmatch.h>
#include <string.h>

#include "agent/trigger.h"

int gt__trig_glob_match(const char *glob, const char *path, size_t len,
                        int with_ancestors)
{
    char buf[GT_STRING_MAX + 1];

    if (len > GT_STRING_MAX)
        len = GT_STRING_MAX;
    memcpy(buf, path, len);
    buf[len] = '\0';
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
