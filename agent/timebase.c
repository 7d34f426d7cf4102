/*
 * The TSC time base behind gt__now (see agent/internal.h for the why).
 *
 * Maps are immutable once published: the streamer fills the next slot of a
 * small ring and publishes its address with a release store, so a reader
 * needs one load, rdtsc and a multiply, with no sequence lock. A slot is
 * rewritten only after GT__MAPS more updates (over a minute at one update a
 * second), long after any reader that loaded its address has used it.
 *
 * Fitting: the frequency comes from the pair taken at init and the pair
 * taken now (the baseline grows, so the estimate sharpens with time). Each
 * new map starts at the old map's value at the switch (continuity, hence
 * per-thread monotonicity) and tilts its slope by the measured error so the
 * map meets CLOCK_MONOTONIC again one second later. NTP slewing of
 * CLOCK_MONOTONIC is followed the same way. An error beyond 5 ms (a
 * paused VM, a TSC that is not what it claims) turns the TSC off for good.
 */
#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "agent/internal.h"

#define GT__MAPS 64
#define FIRST_FIT_NS 50000000ll
#define REFIT_NS 1000000000ll
#define MAX_ERROR_NS 5000000ll
#define MAX_TILT 0.001 /* slope correction per refit, relative */
#define MAX_PAIR_TICKS 20000 /* widest usable pair: 20 us at >= 1 GHz */

const struct gt__tsc_map *_Atomic gt__tsc_map;

static struct gt__tsc_map maps[GT__MAPS];
static unsigned next_map;
static int usable;
static uint64_t tsc0, mono0, last_fit;

/* A (tsc, mono) pair read as close together as we can: best of 5.
 * @return the width of the best window, in ticks. */
static uint64_t pair(uint64_t *tsc, uint64_t *mono)
{
    uint64_t best = UINT64_MAX;

    for (int i = 0; i < 5; i++) {
        uint64_t a = __builtin_ia32_rdtsc();
        uint64_t m = gt__mono_ns();
        uint64_t b = __builtin_ia32_rdtsc();
        if (b - a < best) {
            best = b - a;
            *tsc = a + (b - a) / 2;
            *mono = m;
        }
    }
    return best;
}

/* Invariant TSC (CPUID) and the kernel's own clocksource is the TSC: then
 * CLOCK_MONOTONIC is itself derived from it, synchronised across CPUs. */
static int tsc_trusted(void)
{
    unsigned a, b, c, d;
    char buf[32] = {0};
    int fd;
    ssize_t n;

    if (!__get_cpuid(0x80000007, &a, &b, &c, &d) || !(d & (1u << 8)))
        return 0;
    fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
              O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    return n >= 3 && memcmp(buf, "tsc", 3) == 0 && (buf[3] == '\n' || buf[3] == 0);
}

void gt__timebase_init(int enabled)
{
#if defined(__x86_64__)
    usable = enabled && tsc_trusted();
    if (usable)
        (void)pair(&tsc0, &mono0);
    GT__DIAG("time base: %s", usable ? "TSC mapped to CLOCK_MONOTONIC" : "clock_gettime");
#else
    (void)enabled;
#endif
}

static uint64_t map_eval(const struct gt__tsc_map *m, uint64_t tsc)
{
    int64_t d = (int64_t)(tsc - m->tsc_base);
    return m->mono_base +
           (uint64_t)(int64_t)(((__int128)d * (__int128)m->mult) >> GT__TSC_SHIFT);
}

/*
 * Per-thread monotonicity at a switch of maps: a thread may read the old
 * map and then the new one. The first map starts a window's width (ticks
 * taken as ns, an upper bound at any TSC rate >= 1 GHz) ahead of the pair
 * so that it is not behind the clock_gettime values it replaces; a refit
 * starts 2 ns above the old map's value at a base read just before
 * publishing, which covers the slope change over the few ticks a racing
 * reader can be past that base. The next refit absorbs these biases.
 */
int gt__timebase_update(void)
{
    const struct gt__tsc_map *cur;
    struct gt__tsc_map *m;
    uint64_t tsc = 0, mono = 0, window;
    double ns_per_tick;

    if (!usable)
        return 0;
    window = pair(&tsc, &mono);
    /* Every try preempted (a loaded machine): a pair that loose would bend
     * the map by its width; fit at the next update instead. */
    if (window > MAX_PAIR_TICKS)
        return 0;
    if ((int64_t)(mono - mono0) < FIRST_FIT_NS ||
        (last_fit && (int64_t)(mono - last_fit) < REFIT_NS) || tsc <= tsc0)
        return 0;
    last_fit = mono;
    ns_per_tick = (double)(mono - mono0) / (double)(tsc - tsc0);
    cur = atomic_load(&gt__tsc_map);
    m = &maps[next_map++ % GT__MAPS];
    if (!cur) {
        m->tsc_base = tsc;
        m->mono_base = mono + window + 1;
    } else {
        int64_t err = (int64_t)(map_eval(cur, tsc) - mono);
        double tilt = (double)err / (double)REFIT_NS;

        if (err > MAX_ERROR_NS || err < -MAX_ERROR_NS) {
            usable = 0;
            atomic_store(&gt__tsc_map, NULL);
            return -ERANGE;
        }
        if (tilt > MAX_TILT)
            tilt = MAX_TILT;
        if (tilt < -MAX_TILT)
            tilt = -MAX_TILT;
        ns_per_tick *= 1.0 - tilt;
        m->tsc_base = __builtin_ia32_rdtsc();
        m->mono_base = map_eval(cur, m->tsc_base) + 2;
    }
    m->mult = (uint64_t)(ns_per_tick * (double)(1ull << GT__TSC_SHIFT) + 0.5);
    atomic_store_explicit(&gt__tsc_map, m, memory_order_release);
    return 0;
}
