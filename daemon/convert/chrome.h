/*
 * The Chrome JSON emitter's own state (struct gt__chrome), shared by its
 * two files: emit_chrome.c (the events and the tracks' metadata events)
 * and files.c (the files: creation, rotation, the metadata tail each file
 * gets, acknowledgement marks, a full disk's cut files).
 *
 * It is made by gt__chrome_kind (emit.h) for one writer, whose counts it
 * reads for each file's metadata (gt__emit_src.w) and never calls; what it
 * clamps it counts in the writer's anomalies (an), its first error goes to
 * the writer's sticky error (err). Nothing outside these two files sees
 * this struct. Internal to the converter.
 */
#ifndef GRADTRACE_DAEMON_CONV_CHROME_H
#define GRADTRACE_DAEMON_CONV_CHROME_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/convert/emit.h"
#include "daemon/convert/jsonw.h"

struct gt__cstream;
struct gt__writer;
struct gt__anomalies;

struct gt__chrome_file {
    char *path;
    uint64_t count_off;   /* offset of the file_count placeholder */
    uint64_t dev, ino;    /* identity at creation: a re-open must find it */
    uint64_t size;        /* bytes written, when closed */
    int indexed;          /* linked in the unfinished-file index */
};

/* A process as its files name it: "M" events written once per file. */
struct gt__chrome_proc {
    uint32_t pid, sort;
    uint32_t meta_file;   /* 1 + index of the file holding its metadata */
    char *name;           /* escaped */
    uint32_t name_len;
};

/* A track: its identity, pre-rendered as `"pid":P,"tid":T` so that an
 * event's identity is one memcpy, and its metadata's file. */
struct gt__chrome_track {
    uint32_t proc, sort;
    uint32_t meta_file;   /* 1 + index of the file holding its metadata */
    uint32_t declared;
    char *name;           /* escaped */
    uint32_t name_len;
    uint32_t pt_len;
    char pt[48];
};

struct gt__chrome {
    struct gt__emit base;
    struct gt__cstream *s;        /* shared */
    const struct gt__writer *wr;  /* read for each file's metadata */
    struct gt__anomalies *an;     /* the writer's: what was clamped */
    int *err;                     /* the writer's sticky error */
    int window;                   /* a capture window's files ... */
    uint32_t win_id;              /* ... of window win_id */
    char *stem, *out_path;        /* how its files are named (one of two) */

    struct gt__jw w;
    int fd;
    int file_open;
    uint32_t file_index;  /* index of the current (or next) file */
    uint64_t file_events;
    uint64_t file_ops;    /* cpu_op events in this file */
    uint64_t total_events;
    uint64_t total_bytes; /* bytes of closed files */
    struct gt__chrome_file *files;
    size_t nfiles;
    uint64_t flow_id;

    struct gt__chrome_proc *procs;
    uint32_t nprocs;
    struct gt__chrome_track *tracks; /* by track number; 0 unused */
    uint32_t ntracks;
};

/* ------------------------------------------------ files.c */

/* Creates the next file and writes its head. @return 0 or -errno. */
GT__WUR int gt__chrome_file_open(struct gt__chrome *ch);
/* Writes the metadata tail and closes the current file (last: no file
 * follows). @return 0 or -errno (also the sticky error). */
GT__WUR int gt__chrome_file_close(struct gt__chrome *ch, int last);
/* Rotates when the current file is past a limit. Safe point only.
 * @return 0 or the error. */
GT__WUR int gt__chrome_maybe_rotate(struct gt__chrome *ch);
/* Patches file_count into every file written. */
void gt__chrome_patch_count(struct gt__chrome *ch);
/* A full disk: the open file is left as it is on disk (its fd kept in
 * the stream's cut list, its buffer dropped) and the next event starts
 * the next file. */
void gt__chrome_file_cut(struct gt__chrome *ch);

#endif /* GRADTRACE_DAEMON_CONV_CHROME_H */
