/*
 * agent_setenv: a program that changes its environment while the agent
 * works on other threads, for tests/e2e/t_agent_setenv.sh. Python's
 * os.environ[...] = ... is a setenv; glibc's setenv may move the environ
 * array (realloc) and free the old one, so a getenv running on another
 * thread at that moment reads freed memory: an agent that read the
 * environment after it started its threads crashed such jobs.
 *
 * One thread churns the environment (setenv of new names, with small
 * allocations between them so the array cannot grow in place, then
 * unsetenv), while the others arm triggers through the agent's API
 * (gt_trigger_arm, looked up with dlsym), the code path a daemon's trigger
 * takes on the streamer thread. The triggers name another process
 * (pids=1), so none is armed and the agent's trigger slots never fill.
 *
 * Usage: agent_setenv SECONDS
 * Exit 0 when it ran the whole time, 2 on bad usage, 3 without the agent.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NAMES 96
#define ARMERS 2

static volatile int g_stop;

static void *churn(void *arg)
{
    void *pad[NAMES];
    char name[32];
    unsigned long rounds = 0;

    (void)arg;
    while (!g_stop) {
        for (int i = 0; i < NAMES; i++) {
            snprintf(name, sizeof(name), "GT_CHURN_%d", i);
            setenv(name, "x", 1);
            pad[i] = malloc(24);
        }
        for (int i = 0; i < NAMES; i++) {
            snprintf(name, sizeof(name), "GT_CHURN_%d", i);
            unsetenv(name);
            free(pad[i]);
        }
        rounds++;
    }
    return (void *)rounds;
}

static void *arm(void *fn)
{
    int (*trigger_arm)(const char *) = (int (*)(const char *))fn;

    while (!g_stop)
        (void)trigger_arm("layer=nosuch,pids=1");
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t churner, armers[ARMERS];
    struct timespec nap;
    void *fn;
    double secs;

    if (argc != 2 || (secs = atof(argv[1])) <= 0) {
        fprintf(stderr, "usage: agent_setenv SECONDS\n");
        return 2;
    }
    fn = dlsym(RTLD_DEFAULT, "gt_trigger_arm");
    if (!fn) {
        fprintf(stderr, "agent_setenv: gt_trigger_arm not found (agent not loaded)\n");
        return 3;
    }
    pthread_create(&churner, NULL, churn, NULL);
    for (int i = 0; i < ARMERS; i++)
        pthread_create(&armers[i], NULL, arm, fn);
    nap.tv_sec = (time_t)secs;
    nap.tv_nsec = (long)((secs - (double)nap.tv_sec) * 1e9);
    nanosleep(&nap, NULL);
    g_stop = 1;
    pthread_join(churner, NULL);
    for (int i = 0; i < ARMERS; i++)
        pthread_join(armers[i], NULL);
    return 0;
}
