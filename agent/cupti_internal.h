/*
 * Shared by the CUDA files of the agent and their tests, bottom up (each
 * calls only those above it in this list):
 *   cupti_api.c      CUPTI's entry points: loading, checking results,
 *                    switching the activity kinds;
 *   cupti_sync.c     clock models and the per-device start events;
 *   cupti_records.c  the activity buffer pool and activity buffer -> wire
 *                    records (the buffer-completed path, run by CUPTI's
 *                    worker or a flushing thread);
 *   cupti.c          start, injection entry point, external correlation
 *                    push/pop and the backward layers (agent/cuda.h).
 *
 * Records go through the hooks' record output (agent/rec_out.h), so
 * tests can catch what the CUDA code writes without the agent's buffers.
 */
#ifndef GRADTRACE_AGENT_CUPTI_INTERNAL_H
#define GRADTRACE_AGENT_CUPTI_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "agent/cupti_abi.h"
#include "gradtrace/gradtrace.h"

/* Warning codes (GT_R_WARNING.code) besides raw CUptiResult values. */
enum {
    GT__CUDA_WARN_NO_CUPTI = 0x4301,   /* libcupti not found or too old */
    GT__CUDA_WARN_SYNC = 0x4302,       /* a start-event clock sync failed */
    GT__CUDA_WARN_POOL = 0x4303,       /* activity buffer pool unavailable */
};

/* CUPTI's entry points once loaded (all NULL before). */
extern struct gt__cupti_api gt__cupti;

/*
 * Loads CUPTI: path when given, else a copy already in the process, else
 * the usual install places (see cupti_api.c). Fills gt__cupti.
 * @return 0, -ENOENT (no library found) or -ENOSYS (a required symbol is
 *         missing). Cold path; not thread-safe (init only).
 */
__attribute__((warn_unused_result)) int gt__cupti_load(const char *path);

/*
 * Checks a CUPTI result. On failure, records one warning per call site
 * ("CUPTI <call> failed at <file>:<line>: <name> (<code>)") and returns
 * -EIO; GT__CUPTI_CALL passes the call's text, file and line.
 */
int gt__cupti_check(int result, const char *call, const char *file,
                    int line);
#define GT__CUPTI_CALL(x) gt__cupti_check((x), #x, __FILE__, __LINE__)

/* @return 1 when the CUDA runtime or driver is mapped in this process
 * (and notes the runtime's directory for gt__cupti_load's search). */
int gt__cuda_in_process(void);

/*
 * The activity buffer pool (agent/cupti_records.c), made once before
 * CUPTI may ask for a buffer. @return 0 or -ENOMEM.
 */
__attribute__((warn_unused_result)) int gt__cupti_pool_create(void);

/* CUPTI's buffer-requested callback: a pool buffer, or none (*buf NULL:
 * CUPTI drops and counts). Lock-free, no allocation, any thread. */
void gt__cupti_buffer_requested(uint8_t **buf, size_t *size,
                                size_t *max_records);

/*
 * CUPTI's buffer-completed callback: turns every record of buf[0..valid)
 * into wire records through gt__rec_out, emits the cumulative CUPTI drop
 * count, and returns buf to the pool when it came from it. Any thread
 * (serialised inside); allocates only to intern a new name.
 */
void gt__cupti_buffer_completed(void *ctx, uint32_t stream, uint8_t *buf,
                                size_t size, size_t valid);

/* Drops the name caches (tests; a new session). Not thread-safe. */
void gt__cupti_records_reset(void);

/* --------------------------------------------------------- clocks (sync) */

/*
 * Maps a CUPTI activity timestamp to host CLOCK_MONOTONIC through the
 * CUPTI-domain clock model. Any thread.
 */
uint64_t gt__cupti_map_ts(uint64_t ts);

/*
 * Takes one (host, cuptiGetTimestamp, host) pair into the CUPTI-domain
 * model. Internal only: GT_R_CLOCK_SYNC's negative device numbers mean
 * host pairs, so this domain is not put on the wire. Any thread; cheap
 * (no GPU involved).
 */
void gt__cupti_sync_cupti_pair(void);

/*
 * A start event is about to be recorded on CUPTI stream `stream` of
 * device `device` while the host clock is in [host_lo, host_hi]; warm
 * marks warm-up events whose pairs are not used. Any thread.
 * @return 0 or -ENOSPC when too many events are pending for the device.
 */
int gt__cupti_sync_expect(uint32_t device, uint32_t stream, uint64_t host_lo,
                          uint64_t host_hi, int warm);

/*
 * A CUDA_EVENT activity record arrived: when it belongs to a pending start
 * event, adds its pair to the device's model and emits GT_R_CLOCK_SYNC.
 */
void gt__cupti_sync_on_event(const struct gt__cu_cuda_event *ev);

/* Resets every clock model and pending event (tests; a new session). */
void gt__cupti_sync_reset(void);

/*
 * Starts the clock-sync thread (start events at capture start and every
 * GT__CUDA_SYNC_PERIOD_MS while capturing; enables and disables activity
 * kinds as capture turns on and off). Idempotent.
 * @return 0 or a negative errno.
 */
__attribute__((warn_unused_result)) int gt__cupti_sync_start(void);

/* Per-device sync result for tests and diagnostics. @return 0 or -ENOENT. */
int gt__cupti_sync_model(int device, int64_t *offset, uint64_t *uncertainty);

/* Enables (on=1) or disables the activity kinds (agent/cupti_api.c).
 * @return 0 or -EIO. */
int gt__cupti_set_enabled(int on);

#define GT__CUDA_SYNC_PERIOD_MS 10000u
#define GT__CUDA_MAX_DEVICES 64

/*
 * CUDA injection entry point (agent/cupti.c, exported): the driver calls it
 * from cuInit when CUDA_INJECTION64_PATH names this library.
 * @return 1 (the driver ignores failure; ours is in the stream).
 */
GT_API int InitializeInjection(void);

/* ------------------------------------------------------------ tests only
 * Test hooks: not used by the agent itself. */

/* Marks CUPTI running (on) or off, to run the ext push/pop paths against
 * the loaded CUPTI (agent/cupti.c); registers (or removes) the kernel
 * tags with the event core as a real start does. */
void gt__cupti_test_set_running(int on);

/*
 * One sync round against a fake driver (tests/unit/test_cupti.c drives the
 * start-event path without a GPU; agent/cupti_sync.c). @return devices
 * synced.
 */
int gt__cupti_sync_test_round(const struct gt__cu_driver *fake, int all);

#endif
