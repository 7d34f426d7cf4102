/* Allocation wrapper with failure injection for tests; see alloc.h. */
#include "common/alloc.h"

#include <stdlib.h>
#include <string.h>

static long fail_countdown = -1;

static int should_fail(void)
{
    if (fail_countdown < 0)
        return 0;
    if (fail_countdown == 0)
        return 1;
    fail_countdown--;
    return 0;
}

void gt__alloc_fail_after(long n)
{
    fail_countdown = n;
}

void *gt__malloc(size_t size)
{
    return should_fail() ? NULL : malloc(size);
}

void *gt__calloc(size_t n, size_t size)
{
    return should_fail() ? NULL : calloc(n, size);
}

void *gt__realloc(void *p, size_t size)
{
    return should_fail() ? NULL : realloc(p, size);
}

void gt__free(void *p)
{
    free(p);
}

char *gt__strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = gt__malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}
