/*
 * The open-addressing index's slots (index.h): made and freed here, once
 * for every table that uses one; probing is inline in the header.
 */
#include <errno.h>

#include "common/alloc.h"
#include "daemon/convert/index.h"

int gt__index_init(struct gt__index *ix, size_t nslots)
{
    uint32_t *s;

    if (nslots < 2 || (nslots & (nslots - 1)) || nslots > (size_t)UINT32_MAX)
        return -EINVAL;
    s = gt__calloc(nslots, sizeof(*s));
    if (!s)
        return -ENOMEM;
    gt__free(ix->slot);
    ix->slot = s;
    ix->mask = (uint32_t)(nslots - 1);
    return 0;
}

void gt__index_free(struct gt__index *ix)
{
    gt__free(ix->slot);
    ix->slot = NULL;
    ix->mask = 0;
}
