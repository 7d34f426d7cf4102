/*
 * The slice of the CUPTI and CUDA driver ABI the agent uses, written out so
 * the agent builds (and loads) on machines without the CUDA toolkit: it
 * never includes cupti.h or cuda.h and never links either library.
 *
 * Activity records: CUPTI hands out the newest version of each record
 * struct its version knows. The agent reads only fields that every version
 * since CUDA 11 keeps at the same offsets (the "prefix" of each struct);
 * tests/unit/test_cupti.c checks every offset below against the real
 * headers (CUpti_ActivityKernel10 from CUDA 13, and the older
 * CUpti_ActivityKernel4 still shipped in cupti_activity_deprecated.h), and
 * agent/cupti.c refuses CUPTI versions older than GT__CUPTI_MIN_VERSION.
 *
 * All records are packed and 8-byte aligned (CUPTI's PACKED_ALIGNMENT).
 */
#ifndef GRADTRACE_AGENT_CUPTI_ABI_H
#define GRADTRACE_AGENT_CUPTI_ABI_H

#include <stddef.h>
#include <stdint.h>

#define GT__CU_PACKED __attribute__((packed, aligned(8)))

/* CUPTI API versions (cuptiGetVersion): 13 = CUDA 11.0, 130000 = 13.0. */
#define GT__CUPTI_MIN_VERSION 13u
#define GT__CUPTI_V13_FORMAT 130000u

/* CUptiResult values the agent names. */
enum {
    GT__CUPTI_SUCCESS = 0,
    GT__CUPTI_ERROR_MAX_LIMIT_REACHED = 12,
    GT__CUPTI_ERROR_NOT_INITIALIZED = 15,
    GT__CUPTI_ERROR_UNKNOWN = 999,
};

/* CUpti_ActivityKind values. */
enum {
    GT__CU_KIND_MEMCPY = 1,
    GT__CU_KIND_MEMSET = 2,
    GT__CU_KIND_KERNEL = 3,
    GT__CU_KIND_DRIVER = 4,
    GT__CU_KIND_RUNTIME = 5,
    GT__CU_KIND_CONCURRENT_KERNEL = 10,
    GT__CU_KIND_OVERHEAD = 17,
    GT__CU_KIND_CUDA_EVENT = 36,
    GT__CU_KIND_EXTERNAL_CORRELATION = 39,
};

/* CUpti_ExternalCorrelationKind values. */
enum {
    GT__CU_EXT_UNKNOWN = 1,
    GT__CU_EXT_CUSTOM0 = 3,
    GT__CU_EXT_CUSTOM1 = 4,
    GT__CU_EXT_CUSTOM2 = 5,
};

enum { GT__CU_OBJECT_THREAD = 2 };             /* CUpti_ActivityObjectKind */
enum { GT__CU_DOMAIN_DRIVER = 1, GT__CU_DOMAIN_RUNTIME = 2 }; /* callback domains */
enum { GT__CU_THREAD_ID_SYSTEM = 1 };          /* CUpti_ActivityThreadIdType */
enum { GT__CU_FLUSH_FORCED = 1 };              /* CUPTI_ACTIVITY_FLAG_FLUSH_FORCED */

/* Every record starts with its kind. */
struct gt__cu_record {
    uint32_t kind;
} GT__CU_PACKED;

/* CUpti_ActivityKernel4..10 prefix (CONCURRENT_KERNEL and KERNEL). */
struct gt__cu_kernel {
    uint32_t kind;
    uint8_t cache_config;
    uint8_t shared_memory_config;
    uint16_t registers_per_thread;
    uint32_t partitioned_cache_requested;
    uint32_t partitioned_cache_executed;
    uint64_t start;
    uint64_t end;
    uint64_t completed;
    uint32_t device_id;
    uint32_t context_id;
    uint32_t stream_id;
    int32_t grid[3];
    int32_t block[3];
    int32_t static_shared_memory;
    int32_t dynamic_shared_memory;
    uint32_t local_memory_per_thread;
    uint32_t local_memory_total;
    uint32_t correlation_id;
    int64_t grid_id;
    const char *name;
} GT__CU_PACKED;

/* CUpti_ActivityMemcpy5/6 prefix. */
struct gt__cu_memcpy {
    uint32_t kind;
    uint8_t copy_kind;
    uint8_t src_kind;
    uint8_t dst_kind;
    uint8_t flags;
    uint64_t bytes;
    uint64_t start;
    uint64_t end;
    uint32_t device_id;
    uint32_t context_id;
    uint32_t stream_id;
    uint32_t correlation_id;
} GT__CU_PACKED;

/* CUpti_ActivityMemset4 prefix. */
struct gt__cu_memset {
    uint32_t kind;
    uint32_t value;
    uint64_t bytes;
    uint64_t start;
    uint64_t end;
    uint32_t device_id;
    uint32_t context_id;
    uint32_t stream_id;
    uint32_t correlation_id;
} GT__CU_PACKED;

/* CUpti_ActivityAPI (RUNTIME and DRIVER). */
struct gt__cu_api {
    uint32_t kind;
    uint32_t cbid;
    uint64_t start;
    uint64_t end;
    uint32_t process_id;
    uint32_t thread_id;
    uint32_t correlation_id;
    uint32_t return_value;
} GT__CU_PACKED;

/* CUpti_ActivityExternalCorrelation. */
struct gt__cu_ext_corr {
    uint32_t kind;
    uint32_t external_kind;
    uint64_t external_id;
    uint32_t correlation_id;
    uint32_t reserved;
} GT__CU_PACKED;

/* CUpti_ActivityOverhead3 prefix (objectId is a 12-byte union). */
struct gt__cu_overhead {
    uint32_t kind;
    uint32_t overhead_kind;
    uint32_t object_kind;
    uint32_t object_id[3];  /* THREAD: {processId, threadId, -} */
    uint64_t start;
    uint64_t end;
} GT__CU_PACKED;

/* CUpti_ActivityCudaEvent2. */
struct gt__cu_cuda_event {
    uint32_t kind;
    uint32_t correlation_id;
    uint32_t context_id;
    uint32_t stream_id;
    uint32_t event_id;
    uint32_t pad;
    uint32_t device_id;
    uint32_t pad2;
    void *reserved0;
    uint64_t device_timestamp;
    uint64_t cuda_event_sync_id;
} GT__CU_PACKED;

_Static_assert(offsetof(struct gt__cu_kernel, name) == 104, "kernel.name");
_Static_assert(offsetof(struct gt__cu_api, correlation_id) == 32, "api.corr");
_Static_assert(sizeof(struct gt__cu_ext_corr) == 24, "ext corr");
_Static_assert(offsetof(struct gt__cu_cuda_event, device_timestamp) == 40,
               "cuda_event.deviceTimestamp");

/* CUPTI entry points, resolved with dlsym. */
typedef void (*gt__cupti_buffer_request_fn)(uint8_t **buf, size_t *size,
                                            size_t *max_records);
typedef void (*gt__cupti_buffer_complete_fn)(void *ctx, uint32_t stream,
                                             uint8_t *buf, size_t size,
                                             size_t valid);
typedef uint64_t (*gt__cupti_timestamp_fn)(void);

struct gt__cupti_api {
    int (*GetVersion)(uint32_t *version);
    int (*GetResultString)(int result, const char **str);
    int (*SetThreadIdType)(int type);
    int (*ActivityRegisterTimestampCallback)(gt__cupti_timestamp_fn fn);
    int (*ActivityRegisterCallbacks)(gt__cupti_buffer_request_fn request,
                                     gt__cupti_buffer_complete_fn complete);
    int (*ActivityEnable)(uint32_t kind);
    int (*ActivityDisable)(uint32_t kind);
    int (*ActivityGetNextRecord)(uint8_t *buf, size_t valid, void **record);
    int (*ActivityGetNumDroppedRecords)(void *ctx, uint32_t stream,
                                        size_t *dropped);
    int (*ActivityFlushAll)(uint32_t flag);
    int (*ActivityFlushPeriod)(uint32_t ms);
    int (*ActivityPushExternalCorrelationId)(uint32_t kind, uint64_t id);
    int (*ActivityPopExternalCorrelationId)(uint32_t kind, uint64_t *id);
    int (*ActivityEnableCudaEventDeviceTimestamps)(uint8_t enable);
    int (*GetTimestamp)(uint64_t *ts);
    int (*GetCallbackName)(uint32_t domain, uint32_t cbid, const char **name);
    int (*GetStreamId)(void *ctx, void *stream, uint32_t *id);
};

/* CUDA driver entry points for the start events (agent/cupti_sync.c). */
struct gt__cu_driver {
    int (*DeviceGetCount)(int *count);
    int (*DeviceGet)(int *dev, int ordinal);
    int (*DevicePrimaryCtxGetState)(int dev, unsigned *flags, int *active);
    int (*DevicePrimaryCtxRetain)(void **ctx, int dev);
    int (*DevicePrimaryCtxRelease)(int dev);
    int (*CtxPushCurrent)(void *ctx);
    int (*CtxPopCurrent)(void **ctx);
    int (*StreamCreate)(void **stream, unsigned flags);
    int (*StreamDestroy)(void *stream);
    int (*EventCreate)(void **event, unsigned flags);
    int (*EventRecord)(void *event, void *stream);
    int (*EventSynchronize)(void *event);
    int (*EventDestroy)(void *event);
};

#define GT__CU_STREAM_NON_BLOCKING 0x1u /* CU_STREAM_NON_BLOCKING */
#define GT__CU_EVENT_BLOCKING_SYNC 0x1u /* CU_EVENT_BLOCKING_SYNC */

#endif
