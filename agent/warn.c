/*
 * Warnings recorded into the trace (GT_R_WARNING), once per distinct
 * message for the process's life, and written to stderr as a GT__DIAG line
 * when GRADTRACE_LOG asks. Apart from agent/diag.c, whose formatter must
 * stay below everything (the time base and the buffers use it too): a
 * warning needs the string table, the buffers and the clock.
 */
#include <pthread.h>

#include "agent/internal.h"

/* Ids of messages already warned about (a warning is rare: a small set). */
#define WARN_MAX 256
static pthread_mutex_t warn_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t warned[WARN_MAX];
static unsigned nwarned;

void gt__warn_once(uint32_t code, const char *msg)
{
    uint32_t id = gt__intern(msg, strlen(msg));
    int first = 1;
    struct gt_r_warning w;

    pthread_mutex_lock(&warn_lock);
    for (unsigned i = 0; i < nwarned; i++)
        if (warned[i] == id)
            first = 0;
    if (first && nwarned < WARN_MAX)
        warned[nwarned++] = id;
    pthread_mutex_unlock(&warn_lock);
    if (!first)
        return;
    GT__DIAG("warning %u: %s", code, msg);
    if (!id)
        return;
    w.h.type = GT_R_WARNING;
    w.h.size = sizeof(w);
    w.code = code;
    w.text = id;
    w.ts = gt__now();
    (void)gt__emit(&w, sizeof(w));
}
