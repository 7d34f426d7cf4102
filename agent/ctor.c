/*
 * The agent's only entry points run by the loader: the constructor reads
 * the environment once and starts the core (agent/core.c), then the
 * optional hooks (PyTorch, CUDA) when their files are linked in; the
 * destructor and an atexit handler flush at exit.
 *
 * This file stays out of the static archive the tests link
 * (build/libgtagent.a), so a test binary never starts a streamer by
 * accident: tests call gt__agent_start themselves.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/core.h"
#include "agent/hooks.h"
#include "agent/internal.h"
#include "agent/trigger.h"

/*
 * GRADTRACE_TRIGGER: trigger specs separated by ';', armed at start (the
 * offline path: with GRADTRACE_FILE there is no daemon to send them). A
 * spec refused is said like any bad value (agent/config.c): in the
 * trace's warnings, and on stderr with GRADTRACE_LOG.
 */
static void arm_env_triggers(const char *p)
{
    while (p && *p) {
        const char *semi = strchr(p, ';');
        size_t n = semi ? (size_t)(semi - p) : strlen(p);
        int rc = n ? gt__trig_arm(p, n) : 0;

        if (rc < 0) {
            char msg[160];
            snprintf(msg, sizeof(msg), "GRADTRACE_TRIGGER spec \"%.*s%s\" ignored: %s",
                     n > 40 ? 40 : (int)n, p, n > 40 ? "..." : "",
                     rc == -EINVAL ? "not a valid trigger spec"
                     : rc == -ENOSPC ? "too many triggers armed" : gt__strerror(rc));
            gt__warn_once(GT__WARN_CONFIG, msg);
        }
        p = semi ? semi + 1 : NULL;
    }
}

static void at_exit(void)
{
    gt__agent_stop();
}

__attribute__((constructor)) static void gt__agent_ctor(void)
{
    static int done;
    struct gt__config c;

    if (done)
        return;
    done = 1;
    (void)gt__config_read(&c);
    if (gt__agent_start(&c) < 0)
        return;
    /* Registered after the core started, so it runs after the handlers the
     * application registers later (atexit runs in reverse order). */
    atexit(at_exit);
    arm_env_triggers(gt__agent_config()->trigger);
    /* Bad GRADTRACE_* values were ignored: said in the trace's warnings
     * (and Perfetto's instants), never on the job's stderr. */
    for (int i = 0; i < gt__agent_config()->nbad; i++)
        gt__warn_once(GT__WARN_CONFIG, gt__agent_config()->bad[i]);
    if (gt__torch_init)
        gt__torch_init();
    if (gt__recordfn_init)
        gt__recordfn_init();
    if (gt__ops_init)
        gt__ops_init();
    if (gt__cuda_init)
        gt__cuda_init();
}

__attribute__((destructor)) static void gt__agent_dtor(void)
{
    gt__agent_stop();
}
