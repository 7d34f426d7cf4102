/*
 * One allocation wrapper for the codec, the daemon and the agent's cold
 * paths, so tests can inject failure (as libuv's uv_replace_allocator and
 * SQLite's fault simulation allow). The agent's hot path never allocates.
 */
#ifndef GRADTRACE_COMMON_ALLOC_H
#define GRADTRACE_COMMON_ALLOC_H

#include <stddef.h>

void *gt__malloc(size_t size);
void *gt__calloc(size_t n, size_t size);
void *gt__realloc(void *p, size_t size);
void gt__free(void *p);
char *gt__strdup(const char *s);

/*
 * Test hook: the n-th allocation from now (0 = the next one) and every one
 * after it fail, until called again with a negative n. Not thread-safe;
 * for single-threaded tests only.
 */
void gt__alloc_fail_after(long n);

#endif
