/*
 * What every emitter shares (emit.h): the categories' names, and reading
 * an event's args back by key.
 */
#include "daemon/convert/emit.h"

const struct gt__cat_name gt__cat_names[GT__CAT_COUNT] = {
#define GT__CAT_NAME(id, name) [GT__CAT_##id] = {name, sizeof(name) - 1},
    GT__CATS(GT__CAT_NAME)
#undef GT__CAT_NAME
};

const struct gt__arg *gt__ev_find(const struct gt__ev *ev, const char *key)
{
    size_t kl = strlen(key);
    for (uint32_t i = 0; i < ev->nargs; i++)
        if (ev->args[i].klen == kl && memcmp(ev->args[i].key, key, kl) == 0)
            return &ev->args[i];
    return NULL;
}
