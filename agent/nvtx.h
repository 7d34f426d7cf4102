/*
 * NVTX in the agent, three files bottom up: agent/nvtx_rules.c (text
 * rules, pure), agent/nvtx_ranges.c (per-thread ranges: scopes, seq
 * tags, layers) and agent/nvtx.c (the injection: NVTX's ABI decoded).
 * Here: the NVTX ABI pieces the agent reads and the functions those files,
 * agent/recordfn.c and the tests call. The layout of
 * nvtxEventAttributes_v2 is checked against the real nvtx3 header in
 * tests/unit/test_nvtx.c.
 */
#ifndef GRADTRACE_AGENT_NVTX_H
#define GRADTRACE_AGENT_NVTX_H

#include <stddef.h>
#include <stdint.h>
#include <wchar.h>

#include "agent/internal.h"
#include "gradtrace/gradtrace.h"

enum {
    GT__NVTX_MESSAGE_ASCII = 1,
    GT__NVTX_MESSAGE_UNICODE = 2,
    GT__NVTX_MESSAGE_REGISTERED = 3,
};

/* nvtxEventAttributes_v2 (NVTX_VERSION 2 and 3). */
struct gt__nvtx_attr {
    uint16_t version;
    uint16_t size;          /* sizeof the caller's struct */
    uint32_t category;
    int32_t color_type;
    uint32_t color;
    int32_t payload_type;
    int32_t reserved0;
    uint64_t payload;
    int32_t message_type;
    union {
        const char *ascii;
        const wchar_t *unicode;
        const void *registered; /* nvtxStringHandle_t */
    } message;
};

/* Longest layer path an NVTX range can give (longer: not a layer). */
#define GT__NVTX_PATH_MAX 512

/* ------------------------------------------------------------ rules */

/* A wide string as UTF-8 into out (cut to fit, not terminated).
 * @return the length. */
size_t gt__nvtx_utf8(const wchar_t *w, char *out, size_t cap);

/*
 * Finds PyTorch's "seq = N" in an NVTX range name (also as "stashed seq =
 * N"). @return 1 with *seq set, or 0.
 */
int gt__nvtx_parse_seq(const char *s, uint64_t *seq);

/*
 * NVTX ranges as layers (GRADTRACE_LAYERS=nvtx[:DOMAIN[:GLOB]]).
 *
 * What a range is, from its text, the layer path open around it (parent,
 * plen bytes, not terminated; plen 0: none) and the phase in force:
 *   GT__NVTX_PHASE_*  the words "forward", "backward", "optimizer": a
 *                     phase range, never a layer; the ranges inside it
 *                     are of that phase
 *   GT__NVTX_FWD      a layer's forward: outside any phase range or
 *                     inside "forward"
 *   GT__NVTX_BWD      a layer's backward: "<name> backward", or any layer
 *                     range inside "backward"
 *   GT__NVTX_NONE     anything else: PyTorch's ranges ("seq = N" in the
 *                     name, or "::" as in "aten::empty"), names the glob
 *                     rejects, layer ranges inside "optimizer"
 * For a layer, out receives its path: the name when nothing is open or
 * when it already starts with the open path and "."; otherwise the open
 * path, ".", and the name ("fc1" inside "blocks.3" is "blocks.3.fc1").
 * The glob (fnmatch, NULL or "": any) is matched against that path.
 * @return the kind; *len the path's length (out is NUL-terminated), 0 when
 * the path does not fit in cap (then GT__NVTX_NONE).
 */
enum gt__nvtx_kind {
    GT__NVTX_NONE = 0,
    GT__NVTX_FWD = 1,
    GT__NVTX_BWD = 2,
    GT__NVTX_PHASE_FORWARD = 3,
    GT__NVTX_PHASE_BACKWARD = 4,
    GT__NVTX_PHASE_OPTIMIZER = 5,
};

int gt__nvtx_layer_path(const char *glob, const char *text, int phase,
                        const char *parent, size_t plen, char *out,
                        size_t cap, size_t *len);

/* ------------------------------------------------------------ ranges */

/*
 * Per-thread ranges (agent/nvtx_ranges.c), for the injection handlers.
 * name: the interned name to record, 0 to record nothing (capture off);
 * text: the name's text for the layer rules and the seq tag, NULL when
 * neither applies. Any thread; no allocation but a thread's first range.
 *
 * gt__nvtx_push: @return the new range's level (0-based), as NVTX
 * defines. gt__nvtx_pop: pops the innermost range of domain; @return its
 * level, or -1. gt__nvtx_start: @return the range id gt__nvtx_end takes
 * (it carries the name and what the start opened), on any thread.
 */
int gt__nvtx_push(uint32_t domain, uint32_t name, const char *text);
int gt__nvtx_pop(uint32_t domain);
uint64_t gt__nvtx_start(uint32_t domain, uint32_t name, const char *text);
void gt__nvtx_end(uint64_t id);
/* An NVTX mark: GT_R_INSTANT (name 0: nothing). */
void gt__nvtx_mark(uint32_t name);

/* Interned names: a per-thread cache answers repeated ASCII names
 * without the string table's lock. @return the id, 0 for NULL or on
 * failure. */
uint32_t gt__nvtx_intern(const char *s);
uint32_t gt__nvtx_intern_wide(const wchar_t *w);

/* 1 when GRADTRACE_LAYERS takes NVTX ranges as layers. */
int gt__nvtx_layers_on(void);

/*
 * The layer configuration the handlers use: l (kept, not copied), or NULL
 * for the agent's own (gt__agent_config). For tests; call before any NVTX
 * event.
 */
void gt__nvtx_set_layers(const struct gt__layer_config *l);

/*
 * A libtorch RecordFunction user scope opens / closes on this thread
 * (agent/recordfn.c): it follows the NVTX layer rules above, with
 * GRADTRACE_LAYERS's recordfunction glob, on the same per-thread stack
 * (so scopes and NVTX ranges nest into one path); no NVTX scope is
 * recorded for it. Pairs must nest on one thread. Not async-signal-safe.
 */
void gt__nvtx_scope_push(const char *text);
void gt__nvtx_scope_pop(void);

/* ------------------------------------------------------------ injection */

/*
 * Installs the agent's NVTX handlers through NVTX's export-table getter
 * (what InitializeInjectionNvtx2 receives). @return 1 on success, 0 when
 * the table is unusable (NVTX then stays a no-op).
 */
int gt__nvtx_install(const void *(*get_export_table)(uint32_t));

/*
 * NVTX injection entry point (exported): NVTX calls it at the first NVTX
 * call when NVTX_INJECTION64_PATH names this library. @return 1 when the
 * handlers are installed, 0 otherwise (GRADTRACE_NVTX=0, unusable table).
 */
GT_API int InitializeInjectionNvtx2(const void *(*get_export_table)(uint32_t));

#endif
