/*
 * gradtrace wire format: the agent->daemon stream and the .gtr file.
 *
 * Normative description: schema/wire.md. This header and that document are
 * kept in step by tests/unit/test_schema.c, which parses the record table in
 * the schema and compares type numbers and sizes with the structs below.
 *
 * Layout of a stream or file:
 *
 *     hello                     (struct gt_hello + hostname + command line)
 *     chunk*                    (struct gt_chunk_header + payload)
 *
 * A socket stream and a .gtr file are the same bytes: the file is exactly
 * what an agent would have sent, so the daemon can keep raw captures by
 * appending what it receives, and one decoder reads both.
 *
 * A chunk's payload is a zstd frame (or raw bytes, flag GT_CHUNK_RAW) that
 * decompresses to a sequence of records. Every record starts with
 * struct gt_rec (type, size); a decoder skips types it does not know by
 * their size, so new record types never break old readers. Layouts of
 * existing types never change within a major version: new fields mean a
 * new type.
 *
 * All integers are little-endian; records are packed and unaligned, so
 * readers copy them out with memcpy (gt_wire_* helpers in common/codec.h).
 */
#ifndef GRADTRACE_WIRE_H
#define GRADTRACE_WIRE_H

#include <stdint.h>

/* The layouts' size checks, in C and in C++ (which spells it
 * static_assert): the header compiles alone in either. */
#ifdef __cplusplus
#define GT_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define GT_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define GT_WIRE_MAJOR 1
#define GT_WIRE_MINOR 0

/* "GTRACE" + two NULs: the first 8 bytes of every stream and file. */
#define GT_HELLO_MAGIC "GTRACE\0\0"
/* 'G' 'T' 'C' 'K' little-endian: the first 4 bytes of every chunk. */
#define GT_CHUNK_MAGIC 0x4b435447u

/* Hard limits that every decoder enforces on untrusted input. */
#define GT_CHUNK_MAX_RAW (16u << 20)      /* decompressed payload bytes */
#define GT_CHUNK_MAX_PAYLOAD (17u << 20)  /* compressed payload bytes */
#define GT_HELLO_MAX_SIZE 8192u           /* hello incl. strings */
#define GT_STRING_MAX 4096u               /* one interned string */

#define GT_PACKED __attribute__((packed))

/* ------------------------------------------------------------------ hello */

/* hello.flags */
#define GT_HELLO_FILE 0x1u    /* written to a .gtr file, not a socket */
#define GT_HELLO_CAPTURE 0x2u /* agent started with capture on */
#define GT_HELLO_OPS 0x4u     /* every capture records aten operators
                               * (GRADTRACE_OPS=1) */

/*
 * First bytes of a stream or file. Followed by hostname_len bytes of host
 * name and cmdline_len bytes of command line (arguments separated by NUL),
 * neither NUL-terminated. size = sizeof(struct gt_hello) + hostname_len +
 * cmdline_len, at most GT_HELLO_MAX_SIZE.
 */
struct gt_hello {
    char magic[8];        /* GT_HELLO_MAGIC */
    uint16_t major;       /* GT_WIRE_MAJOR: a reader refuses other majors */
    uint16_t minor;       /* GT_WIRE_MINOR: newer minors only add records */
    uint32_t size;        /* total hello size in bytes */
    uint32_t pid;
    uint32_t ppid;
    int32_t rank;         /* $RANK, or -1 */
    int32_t local_rank;   /* $LOCAL_RANK, or -1 */
    int32_t world_size;   /* $WORLD_SIZE, or -1 */
    uint32_t flags;       /* GT_HELLO_* */
    uint64_t start_mono_ns; /* CLOCK_MONOTONIC at agent start */
    uint64_t start_real_ns; /* CLOCK_REALTIME read next to start_mono_ns */
    uint16_t hostname_len;
    uint16_t cmdline_len;
    uint32_t reserved;    /* zero */
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_hello) == 64, "gt_hello is 64 bytes");

/* ------------------------------------------------------------------ chunk */

/* chunk.flags */
#define GT_CHUNK_RAW 0x1u  /* payload is the records themselves, no zstd */

/*
 * Every chunk. crc is CRC-32C (Castagnoli) over the 48 header bytes with the
 * crc field taken as zero, followed by the payload bytes. seq counts chunks
 * from 0 at agent start and continues across reconnections (a stream may
 * start at any seq): a reader that sees a gap knows how many were lost. Record timestamps are absolute CLOCK_MONOTONIC nanoseconds; zstd
 * removes their redundancy (see schema/wire.md, "Why absolute times").
 */
struct gt_chunk_header {
    uint32_t magic;        /* GT_CHUNK_MAGIC */
    uint8_t major;         /* GT_WIRE_MAJOR */
    uint8_t minor;         /* GT_WIRE_MINOR */
    uint16_t flags;        /* GT_CHUNK_* */
    uint32_t header_size;  /* sizeof(struct gt_chunk_header) */
    uint32_t raw_size;     /* record bytes after decompression */
    uint32_t payload_size; /* bytes that follow this header */
    uint32_t record_count; /* records in the payload */
    uint64_t seq;          /* per-stream chunk number, from 0 */
    uint64_t first_ns;     /* earliest record time, 0 when none */
    uint32_t crc;          /* CRC-32C, see above */
    uint32_t reserved;     /* zero */
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_chunk_header) == 48, "chunk header is 48");

/* ---------------------------------------------------------------- records */

/* Header of every record. size includes this header; size >= 4. */
struct gt_rec {
    uint16_t type;
    uint16_t size;
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_rec) == 4, "record header is 4 bytes");

/*
 * Record types. Numbers are stable forever; 0 is invalid. The X-macro lists
 * each fixed-size type with its struct so code and tests can iterate them.
 * GT_R_STRING and GT_R_PROCESS_INFO are variable-sized (minimum given).
 */
enum gt_rec_type {
    GT_R_STRING = 1,        /* string definition (interning) */
    GT_R_PROCESS_INFO = 2,  /* process metadata */
    GT_R_THREAD_INFO = 3,   /* OS thread metadata */
    GT_R_THREAD = 4,        /* following records belong to this thread */
    GT_R_SCOPE_BEGIN = 5,
    GT_R_SCOPE_END = 6,
    GT_R_NODE_CREATED = 7,  /* autograd node created in the forward */
    GT_R_BWD_NODE_BEGIN = 8,
    GT_R_BWD_NODE_END = 9,
    GT_R_BWD_PASS_BEGIN = 10,
    GT_R_BWD_PASS_END = 11,
    GT_R_STEP = 12,
    GT_R_INSTANT = 13,
    GT_R_GPU_KERNEL = 14,
    GT_R_GPU_MEMCPY = 15,
    GT_R_GPU_MEMSET = 16,
    GT_R_CUDA_API = 17,
    GT_R_EXT_CORR = 18,
    GT_R_CLOCK_SYNC = 19,
    GT_R_LOST = 20,
    GT_R_WINDOW_BEGIN = 21,
    GT_R_WINDOW_END = 22,
    GT_R_WARNING = 23,      /* a diagnostic for the trace's metadata */
    GT_R_WINDOW_DONE = 24,  /* a window's last segment has ended */
    GT_R_BWD_NODE_LAYER = 25, /* the open backward node's layer/parameter */
    GT_R_GOODBYE = 26,      /* the agent's last record: the stream is whole */
    /* WINDOW_BEGIN while capture was on already (gradtrace start,
     * GRADTRACE_CAPTURE=1): the segment's records belong to the main
     * trace as well as to the window. */
    GT_R_WINDOW_BEGIN_SHARED = 27,
    /* 28-29 and 32-37 are reserved; a gap in the numbers is an unknown
     * type (skipped and counted), never a size of 0. */
    GT_R_OP_BEGIN = 30,     /* a libtorch operator (RecordFunction) begins */
    GT_R_OP_END = 31,
    GT_R_COLLECTIVE = 38,   /* a collective call ended (torch.distributed) */
    GT_R_JOB_ROUTE = 39,    /* job-wide triggers can reach the job's ranks */
    GT_R_COMPILED_GRAPH = 40, /* a torch.compile'd graph's map begins */
    GT_R_COMPILED_CALL = 41,  /* one kernel or extern call of that map */
    GT_R_COMPILED_BEGIN = 42, /* a compiled graph starts running here */
    GT_R_COMPILED_END = 43,
    GT_R_COMPILE_SPAN = 44,   /* dynamo/inductor compiled a frame */
    GT_R_LAYER_INFO = 45,     /* a module's name and class */
    GT_R_TYPE_COUNT
};

/* String ids are per stream, from 1; 0 means "no string". */
struct gt_r_string {
    struct gt_rec h;      /* size = 8 + length of text */
    uint32_t id;
    /* char text[]: UTF-8 expected, not NUL-terminated, <= GT_STRING_MAX */
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_string) == 8, "string record is 8+n");

struct gt_r_process_info {
    struct gt_rec h;
    uint32_t pid;
    uint32_t ppid;
    int32_t rank;
    int32_t local_rank;
    int32_t world_size;
    uint32_t hostname;    /* string id */
    uint32_t cmdline;     /* string id: command line, arguments space-joined */
    uint64_t start_mono_ns;
    uint64_t start_real_ns;
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_process_info) == 48, "process_info");

struct gt_r_thread_info {
    struct gt_rec h;
    uint32_t tid;         /* OS thread id */
    uint32_t name;        /* string id of the thread name */
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_thread_info) == 12, "thread_info");

struct gt_r_thread {
    struct gt_rec h;
    uint32_t tid;
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_thread) == 8, "thread");

/* Scope kinds (scope_begin.kind). */
enum gt_scope_kind {
    GT_SCOPE_USER = 0,     /* C API gt_scope_begin */
    GT_SCOPE_MODULE = 1,   /* nn.Module forward */
    GT_SCOPE_NVTX = 2,     /* NVTX push/pop or start/end range */
    GT_SCOPE_COMM = 3,     /* communication: gt_comm_begin, DDP's reducer */
    GT_SCOPE_KIND_COUNT
};

/*
 * scope_begin.flags / scope_end.flags. RECOMPUTE: a module scope opened
 * while a backward node runs on this OS thread (the forward recomputed by
 * activation checkpointing, either flavour); its end carries the same
 * flags as its begin. BACKWARD: a module scope that is the layer's
 * backward (a backward range of a layer source, schema/torch.md), not a
 * forward call.
 */
#define GT_SCOPE_F_RECOMPUTE 0x1u
#define GT_SCOPE_F_BACKWARD 0x2u

struct gt_r_scope_begin {
    struct gt_rec h;
    uint16_t kind;        /* enum gt_scope_kind */
    uint16_t flags;       /* GT_SCOPE_F_*, else zero */
    uint32_t name;        /* string id: module path, range or scope name */
    uint32_t cls;         /* string id: module class or NVTX domain, or 0 */
    uint64_t ts;
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_scope_begin) == 24, "scope_begin");

struct gt_r_scope_end {
    struct gt_rec h;
    uint16_t kind;
    uint16_t flags;
    uint32_t name;        /* same id as the matching begin */
    uint64_t ts;
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_scope_end) == 20, "scope_end");

/* (fwd_tid, seq) is the forward/backward correlation id of a node. */
struct gt_r_node_created {
    struct gt_rec h;
    uint32_t layer;       /* string id of the innermost module scope, or 0 */
    uint64_t ts;
    uint64_t seq;         /* autograd sequence number */
    uint64_t fwd_tid;     /* torch's thread id (RecordFunction) */
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_node_created) == 32, "node_created");

struct gt_r_bwd_node_begin {
    struct gt_rec h;
    uint32_t name;        /* string id of the node's name, e.g. MmBackward0 */
    uint64_t ts;
    uint64_t seq;         /* UINT64_MAX when the node's fields are unknown */
    uint64_t fwd_tid;
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_bwd_node_begin) == 32, "bwd_node_begin");

struct gt_r_bwd_node_end {
    struct gt_rec h;
    uint32_t flags;       /* zero */
    uint64_t ts;
    uint64_t seq;
    uint64_t fwd_tid;
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_bwd_node_end) == 32, "bwd_node_end");

/*
 * Backward pass begin/end, step marks: ts + a counter. value: the
 * iteration the pass belongs to; for GT_R_STEP the number of the step
 * that ends (from 0). flags (BWD_PASS_* only; zero elsewhere and from
 * older agents): STEPS: this stream's iterations are GT_R_STEP marks, so
 * the pass is no iteration boundary; EXTRA: the pass is no iteration
 * (torch.autograd.grad, a second pass over a retained graph).
 */
#define GT_MARK_F_STEPS 0x1u
#define GT_MARK_F_EXTRA 0x2u
struct gt_r_mark {
    struct gt_rec h;
    uint32_t flags;       /* GT_MARK_F_* */
    uint64_t ts;
    uint64_t value;       /* iteration, or step number */
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_mark) == 24, "mark");

struct gt_r_instant {
    struct gt_rec h;
    uint32_t name;
    uint64_t ts;
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_instant) == 16, "instant");

/* GPU records carry device times already mapped to host CLOCK_MONOTONIC. */
struct gt_r_gpu_kernel {
    struct gt_rec h;
    uint32_t device;
    uint32_t stream;
    uint32_t name;        /* string id of the (demangled if possible) name */
    uint32_t corr;        /* CUDA correlation id of the launching API call */
    uint64_t start;
    uint64_t end;
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t shared_mem;  /* static + dynamic bytes */
    uint32_t registers;   /* per thread */
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_gpu_kernel) == 68, "gpu_kernel");

struct gt_r_gpu_memcpy {
    struct gt_rec h;
    uint32_t device;
    uint32_t stream;
    uint32_t corr;
    uint8_t copy_kind;    /* CUpti_ActivityMemcpyKind */
    uint8_t src_kind;     /* CUpti_ActivityMemoryKind */
    uint8_t dst_kind;
    uint8_t pad;
    uint64_t bytes;
    uint64_t start;
    uint64_t end;
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_gpu_memcpy) == 44, "gpu_memcpy");

struct gt_r_gpu_memset {
    struct gt_rec h;
    uint32_t device;
    uint32_t stream;
    uint32_t corr;
    uint32_t value;
    uint64_t bytes;
    uint64_t start;
    uint64_t end;
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_gpu_memset) == 44, "gpu_memset");

struct gt_r_cuda_api {
    struct gt_rec h;
    uint32_t tid;         /* OS thread that made the call */
    uint32_t cbid;        /* CUPTI runtime/driver callback id */
    uint32_t corr;
    uint32_t name;        /* string id of the API function name */
    uint64_t start;
    uint64_t end;
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_cuda_api) == 36, "cuda_api");

/* External correlation kinds (ext_corr.kind). */
enum gt_ext_kind {
    GT_EXT_LAYER_FWD = 1, /* ext id = string id of the module path */
    GT_EXT_LAYER_BWD = 2, /* ext id = string id of the module path */
    GT_EXT_NVTX_SEQ = 3,  /* ext id = PyTorch "seq = N" from an NVTX range */
    GT_EXT_OP = 4,        /* ext id = the enclosing operator's id (OP_BEGIN) */
};

struct gt_r_ext_corr {
    struct gt_rec h;
    uint16_t kind;        /* enum gt_ext_kind */
    uint16_t pad;
    uint32_t corr;        /* CUDA correlation id */
    uint64_t ext;
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_ext_corr) == 20, "ext_corr");

/*
 * A clock pair. device < 0: host pair (mono, real), device_ts unused.
 * device >= 0: device_ts is the device clock at host time mono, with
 * uncertainty_ns the half-width of the interval it was read in.
 */
struct gt_r_clock_sync {
    struct gt_rec h;
    int32_t device;
    uint64_t mono_ns;
    uint64_t real_ns;
    uint64_t device_ts;
    uint64_t uncertainty_ns;
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_clock_sync) == 40, "clock_sync");

/* Lost kinds (lost.what). */
enum gt_lost_kind {
    GT_LOST_EVENTS = 1,   /* records dropped at a full thread buffer */
    GT_LOST_CUPTI = 2,    /* CUPTI activity records dropped */
    GT_LOST_CHUNKS = 3,   /* chunks dropped by the streamer (no sink) */
    GT_LOST_UNDELIVERED = 4, /* a thread's records in chunks never
                              * acknowledged or dropped; process life */
};

/* Cumulative count since the stream began: the newest record wins. */
struct gt_r_lost {
    struct gt_rec h;
    uint32_t tid;         /* thread the count belongs to, 0 for process */
    uint32_t what;        /* enum gt_lost_kind */
    uint64_t count;
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_lost) == 20, "lost");

struct gt_r_window {
    struct gt_rec h;
    uint32_t id;          /* window number within the stream, from 1 */
    uint32_t spec;        /* string id of the trigger spec that opened it */
    uint32_t layer;       /* string id of the layer that opened it, or 0 */
    uint64_t ts;
    uint64_t iteration;
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_window) == 32, "window");

struct gt_r_warning {
    struct gt_rec h;
    uint32_t code;        /* subsystem-defined code, e.g. a CUPTI result */
    uint32_t text;        /* string id of a one-line message */
    uint64_t ts;
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_warning) == 20, "warning");

/*
 * The backward node that began last and is still open on this thread
 * belongs to `layer` (and accumulates parameter `param` of it). Written
 * right after the BWD_NODE_BEGIN of an AccumulateGrad node whose variable
 * is a registered parameter; nodes accumulating into other leaves get none.
 */
struct gt_r_bwd_node_layer {
    struct gt_rec h;
    uint32_t layer;       /* string id: module path */
    uint32_t param;       /* string id: parameter name in it, or 0 */
    uint32_t flags;       /* zero */
    uint64_t ts;
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_bwd_node_layer) == 24, "bwd_node_layer");

/*
 * The last record of a stream the agent ended itself (exit, final flush):
 * nothing it recorded is missing beyond what LOST says. A stream that ends
 * without one (process or daemon killed, connection cut) is truncated.
 */
struct gt_r_goodbye {
    struct gt_rec h;
    uint32_t flags;       /* zero */
    uint64_t ts;          /* when the agent said goodbye */
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_goodbye) == 16, "goodbye");

/*
 * One collective call of the process (torch.distributed all_reduce,
 * barrier, ...), written when it has returned: op names the operation
 * (string id), seq is the call's number among the collectives of its
 * group as this process counts them from 0 (every rank of the group
 * counts the same calls, so (group, seq) names one collective job-wide),
 * group a process-group number (0: the default group), ranks the group's
 * size. begin_ns / end_ns: CLOCK_MONOTONIC before the call and after it
 * returned. Recorded whether or not capture is on (a stream-level record,
 * like clock pairs): `gradtrace merge` aligns the clocks of ranks by them.
 */
struct gt_r_collective {
    struct gt_rec h;
    uint32_t op;          /* string id */
    uint32_t group;
    uint32_t ranks;
    uint64_t seq;
    uint64_t begin_ns;
    uint64_t end_ns;
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_collective) == 40, "collective");

/*
 * Whether this process can carry a job-wide trigger (GT_CTL_JOB_TRIGGER)
 * to every rank of its job: up = 1 once its Python side watches the job's
 * torch.distributed store (python/gradtrace/_jobtrig.py), 0 when it stops.
 * Sent with the process info at the start of every stream and when it
 * changes; the daemon hands job triggers only to agents whose route is up.
 */
struct gt_r_job_route {
    struct gt_rec h;
    uint32_t up;
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_job_route) == 8, "job_route");

/*
 * A libtorch operator (at::RecordFunction of scope FUNCTION: an aten op)
 * on the current thread. id is unique within the stream (the
 * RecordFunction handle); it is the operator's Kineto "External id", and
 * GT_EXT_OP correlations carry it to the CUDA calls and GPU work the
 * operator launched. seq is the autograd sequence number of the node the
 * operator creates (UINT64_MAX when it creates none) and fwd_tid torch's
 * thread id. The end names the same name and id as its begin.
 */
struct gt_r_op_begin {
    struct gt_rec h;
    uint32_t name;        /* string id: operator name, e.g. aten::addmm */
    uint32_t flags;       /* zero */
    uint64_t ts;
    uint64_t id;
    uint64_t seq;
    uint64_t fwd_tid;
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_op_begin) == 44, "op_begin");

struct gt_r_op_end {
    struct gt_rec h;
    uint32_t name;        /* same string id as the begin */
    uint64_t ts;
    uint64_t id;
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_op_end) == 24, "op_end");

/*
 * The compile-time map of a torch.compile'd graph (schema/torch.md,
 * "Compiled models"): one COMPILED_GRAPH, then `calls` COMPILED_CALL
 * records, one per kernel or extern call of its generated wrapper in the
 * wrapper's order. Written when the graph is compiled or loaded from
 * inductor's cache, with or without capture (stream metadata, like
 * collectives): windows opened later need it. `graph` is the stream's
 * number for the map, from 1; the regions that run it name it.
 */
enum gt_compiled_phase {
    GT_COMPILED_FORWARD = 1,
    GT_COMPILED_BACKWARD = 2,
    GT_COMPILED_INFERENCE = 3, /* graph phase only */
    GT_COMPILED_RECOMPUTE = 3, /* call phase only: a forward op the
                                * backward graph recomputes */
};

#define GT_COMPILED_F_CACHED 0x1u  /* graph: loaded from inductor's cache */

struct gt_r_compiled_graph {
    struct gt_rec h;
    uint32_t graph;       /* map number in the stream, from 1 */
    uint32_t code;        /* string id: the wrapper module's code key */
    uint32_t compile_id;  /* string id: dynamo's compile id ("0/1"), or 0 */
    uint32_t graph_id;    /* inductor's graph id (graph_<id>_ scopes),
                           * UINT32_MAX unknown */
    uint16_t phase;       /* enum gt_compiled_phase: 1, 2 or 3 */
    uint16_t flags;       /* GT_COMPILED_F_* */
    uint32_t calls;       /* COMPILED_CALL records of this map */
    uint64_t ts;
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_compiled_graph) == 36, "compiled_graph");

#define GT_CCALL_EXTERN 0x1u   /* an extern call (an aten op), not a kernel */
#define GT_CCALL_FUSED 0x2u    /* computes nodes of several modules: owner
                                * is their deepest common ancestor */
#define GT_CCALL_UNOWNED 0x4u  /* no node of it has a module: owner 0 */
#define GT_CCALL_GPU 0x8u      /* runs on a GPU: scope is its kernel name */

struct gt_r_compiled_call {
    struct gt_rec h;
    uint32_t graph;       /* the map it belongs to */
    uint32_t index;       /* its place among the map's calls, from 0 */
    uint32_t kernel;      /* string id: the name in the generated code */
    uint32_t scope;       /* string id: the name it runs under (its
                           * RecordFunction or GPU kernel name), or 0 */
    uint32_t owner;       /* string id: owning module path, relative to
                           * the compiled module (0: unowned; the empty
                           * string: the compiled module itself) */
    uint32_t fused;       /* string id: the modules it fused, relative
                           * paths separated by spaces, or 0 */
    uint16_t phase;       /* 1 forward, 2 backward, 3 recompute */
    uint16_t flags;       /* GT_CCALL_* */
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_compiled_call) == 32, "compiled_call");

/*
 * A compiled graph's wrapper ran on this thread from COMPILED_BEGIN to
 * COMPILED_END (both name the map). `layer` on the begin is the module
 * the map's relative paths hang from: the innermost module open around
 * the call in a forward, the layer of the backward node running it in a
 * backward (0: the root; none known). Operators recorded between them on
 * the thread are the map's calls (schema/torch.md says how they join).
 */
struct gt_r_compiled_region {
    struct gt_rec h;
    uint32_t graph;
    uint32_t layer;       /* string id, or 0 */
    uint32_t flags;       /* zero */
    uint64_t ts;
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_compiled_region) == 24, "compiled_region");

/*
 * dynamo and inductor compiled one frame from begin_ns to end_ns on this
 * thread (compile id `name`), recorded with or without capture.
 */
struct gt_r_compile_span {
    struct gt_rec h;
    uint32_t name;        /* string id: compile id and frame */
    uint32_t flags;       /* zero */
    uint64_t begin_ns;
    uint64_t end_ns;
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_compile_span) == 28, "compile_span");

/*
 * A module the Python package named (schema/torch.md, "Module names"):
 * its layer name and class, sent once per name when its root is mapped,
 * with or without capture (stream metadata: a compiled region's layers
 * open no scope, so this is where their classes come from).
 * GT_LAYER_F_BARE_ROOT marks the root whose modules are named by their
 * bare named_modules() paths ("blocks.0"): every other module's children
 * are "<its name>.<path>", so a compiled region running in this one has
 * its map's relative paths as layer names; the latest such record holds.
 * GT_LAYER_F_ROOT_CHILD marks a direct child of the bare root ("head",
 * "scale"): its row hangs under that root even when it never runs a
 * forward of its own (a ParameterDict, parameters used by another
 * module), where no scope would nest it.
 */
#define GT_LAYER_F_BARE_ROOT 0x1u
#define GT_LAYER_F_ROOT_CHILD 0x2u

struct gt_r_layer_info {
    struct gt_rec h;
    uint32_t layer;       /* string id: the module's layer name */
    uint32_t cls;         /* string id: its class, or 0 */
    uint32_t flags;       /* GT_LAYER_F_* */
    uint64_t ts;
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_r_layer_info) == 24, "layer_info");

/*
 * Fixed-size record types: X(type, struct). GT_R_STRING and
 * GT_R_PROCESS_INFO's sizes are minimums (STRING grows by its text).
 */
#define GT_WIRE_RECORDS(X)                          \
    X(GT_R_STRING, gt_r_string)                     \
    X(GT_R_PROCESS_INFO, gt_r_process_info)         \
    X(GT_R_THREAD_INFO, gt_r_thread_info)           \
    X(GT_R_THREAD, gt_r_thread)                     \
    X(GT_R_SCOPE_BEGIN, gt_r_scope_begin)           \
    X(GT_R_SCOPE_END, gt_r_scope_end)               \
    X(GT_R_NODE_CREATED, gt_r_node_created)         \
    X(GT_R_BWD_NODE_BEGIN, gt_r_bwd_node_begin)     \
    X(GT_R_BWD_NODE_END, gt_r_bwd_node_end)         \
    X(GT_R_BWD_PASS_BEGIN, gt_r_mark)               \
    X(GT_R_BWD_PASS_END, gt_r_mark)                 \
    X(GT_R_STEP, gt_r_mark)                         \
    X(GT_R_INSTANT, gt_r_instant)                   \
    X(GT_R_GPU_KERNEL, gt_r_gpu_kernel)             \
    X(GT_R_GPU_MEMCPY, gt_r_gpu_memcpy)             \
    X(GT_R_GPU_MEMSET, gt_r_gpu_memset)             \
    X(GT_R_CUDA_API, gt_r_cuda_api)                 \
    X(GT_R_EXT_CORR, gt_r_ext_corr)                 \
    X(GT_R_CLOCK_SYNC, gt_r_clock_sync)             \
    X(GT_R_LOST, gt_r_lost)                         \
    X(GT_R_WINDOW_BEGIN, gt_r_window)               \
    X(GT_R_WINDOW_END, gt_r_window)                 \
    X(GT_R_WARNING, gt_r_warning)                   \
    X(GT_R_WINDOW_DONE, gt_r_window)                \
    X(GT_R_BWD_NODE_LAYER, gt_r_bwd_node_layer)     \
    X(GT_R_GOODBYE, gt_r_goodbye)                   \
    X(GT_R_WINDOW_BEGIN_SHARED, gt_r_window)        \
    X(GT_R_OP_BEGIN, gt_r_op_begin)                 \
    X(GT_R_OP_END, gt_r_op_end)                     \
    X(GT_R_COLLECTIVE, gt_r_collective)             \
    X(GT_R_JOB_ROUTE, gt_r_job_route)               \
    X(GT_R_COMPILED_GRAPH, gt_r_compiled_graph)     \
    X(GT_R_COMPILED_CALL, gt_r_compiled_call)       \
    X(GT_R_COMPILED_BEGIN, gt_r_compiled_region)    \
    X(GT_R_COMPILED_END, gt_r_compiled_region)      \
    X(GT_R_COMPILE_SPAN, gt_r_compile_span)         \
    X(GT_R_LAYER_INFO, gt_r_layer_info)

/* ------------------------------------------------ daemon -> agent messages */

/*
 * The daemon answers the hello and later sends control messages on the same
 * socket. Each is a struct gt_ctl header followed by size - 8 bytes of
 * UTF-8 text (no NUL). Agents ignore types they do not know.
 */
#define GT_CTL_MAGIC 0x4c544347u /* 'G' 'C' 'T' 'L' */
#define GT_CTL_MAX_SIZE 4096u

enum gt_ctl_type {
    GT_CTL_WELCOME = 1,       /* text: daemon version */
    GT_CTL_CAPTURE_ON = 2,    /* text: optional "iterations=N" or "ms=N" */
    GT_CTL_CAPTURE_OFF = 3,   /* text: empty */
    GT_CTL_TRIGGER = 4,       /* text: a canonical trigger spec */
    GT_CTL_TRIGGER_CLEAR = 5, /* text: empty, disarms every trigger */
    GT_CTL_ACK = 6,           /* text: "chunks=N seq=S": N chunks of this
                               * connection are in the daemon's files, S the
                               * highest seq among them */
    /* 7..9 are other families'. */
    GT_CTL_JOB_TRIGGER = 10,  /* text: a canonical trigger spec for every rank
                               * of the job: not armed here, but handed to the
                               * job's Python side (gt_job_trigger_take),
                               * which carries it through the job's
                               * torch.distributed store to every rank */
};

struct gt_ctl {
    uint32_t magic;           /* GT_CTL_MAGIC */
    uint16_t type;            /* enum gt_ctl_type */
    uint16_t size;            /* total bytes incl. this header */
} GT_PACKED;
GT_STATIC_ASSERT(sizeof(struct gt_ctl) == 8, "ctl header is 8 bytes");

#ifdef __cplusplus
}
#endif
#endif /* GRADTRACE_WIRE_H */
