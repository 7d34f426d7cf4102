/*
 * What every emitter shares (emit.h): the categories' names, and reading
 * an event's args back by key.
 */
#include "daemon/convert/emit.h"

static const struct {
    const char *name;
    size_t len;
} cats[GT__CAT_COUNT] = {
#define GT__CAT_NAME(id, name) [GT__CAT_##id] = {name, sizeof(name) - 1},
    GT__CATS(GT__CAT_NAME)
#undef GT__CAT_NAME
};

const char *gt__cat_name(enum gt__cat cat)
{
    return (unsigned)cat < GT__CAT_COUNT ? cats[cat].name : "unknown";
}

size_t gt__cat_len(enum gt__cat cat)
{
    return (unsigned)cat < GT__CAT_COUNT ? cats[cat].len : 7;
}

const struct gt__arg *gt__ev_find(const struct gt__ev *ev, const char *key)
{
    size_t kl = strlen(key);
    for (uint32_t i = 0; i < ev->nargs; i++)
        if (ev->args[i].klen == kl && memcmp(ev->args[i].key, key, kl) == 0)
            return &ev->args[i];
    return NULL;
}
