/*
 * Outputs of a decoded stream, behind one small interface, and the one
 * entry point that converts a recorded file into them.
 *
 * A consumer is fed what the framer decodes: the hello, each chunk's
 * records in order, and the end of input. Two consumers exist: the
 * Chrome-JSON consumer (the converter of convert.h, writing trace files)
 * and the per-layer aggregation consumer (agg.h, what `gradtrace report`
 * prints). Several consumers can be fed from one read of a file.
 *
 * Not thread-safe: one thread drives a consumer.
 */
#ifndef GRADTRACE_DAEMON_CONSUMER_H
#define GRADTRACE_DAEMON_CONSUMER_H

#include <stddef.h>
#include <stdint.h>

#include "common/codec.h"
#include "daemon/convert/convert.h"

struct gt__consumer;

/* What a consumer does; every function returns 0 or a negative errno, which
 * stops the conversion. */
struct gt__consumer_ops {
    int (*hello)(struct gt__consumer *k, const struct gt__hello_info *h);
    int (*chunk)(struct gt__consumer *k, const struct gt_chunk_header *h,
                 const uint8_t *records, size_t raw_size);
    /* End of input: stats of the framer (NULL: none), truncated when the
     * input ended inside a chunk. Called at most once. */
    int (*finish)(struct gt__consumer *k, const struct gt__framer_stats *stats,
                  int truncated);
    void (*free)(struct gt__consumer *k);
};

/* Implementations put this first in their own struct. */
struct gt__consumer {
    const struct gt__consumer_ops *ops;
};

/* Frees a consumer of any kind. NULL is ok. */
void gt__consumer_free(struct gt__consumer *k);

/*
 * The Chrome-JSON consumer: a converter (convert.h) made with opts (copied).
 * @return the consumer, or NULL (errno set).
 */
struct gt__consumer *gt__chrome_consumer_create(const struct gt__conv_opts *opts);
/* Its converter, for gt__conv_summary, gt__conv_files and the like (NULL
 * when k is another kind of consumer). */
struct gt__conv *gt__chrome_consumer_conv(struct gt__consumer *k);

/* Where gt__convert_file stopped (struct gt__convert_info.stage). */
enum gt__convert_stage {
    GT__CONVERT_DONE = 0,   /* converted; every consumer finished */
    GT__CONVERT_OPEN,       /* the file cannot be opened or read: rc */
    GT__CONVERT_STREAM,     /* not a gradtrace stream: rc is the framer's */
    GT__CONVERT_NO_HELLO,   /* input ended before a complete header */
    GT__CONVERT_CONSUMER,   /* a consumer failed: rc is its error */
};

/* Zero it, then set the optional progress callback. */
struct gt__convert_info {
    /* in: called after each block read (done and total bytes; total 0
     * when unknown), may be NULL */
    void (*progress)(void *ud, uint64_t done, uint64_t total);
    void *progress_ud;
    /* out */
    enum gt__convert_stage stage;
    uint64_t size;           /* the file's size, 0 unknown */
    uint64_t read;           /* bytes read */
    int truncated;           /* input ended inside a chunk */
    struct gt__framer_stats stats;
};

/*
 * Converts the recorded stream in the file at path into n consumers: reads it
 * in fixed blocks through a framer in GT__FRAMER_RESYNC mode (memory stays
 * bounded for any input; a corrupt chunk costs only itself), feeds every
 * consumer the hello and each chunk, and at the end finishes every
 * consumer. The consumers stay owned by the caller. info (not NULL) says where it stopped.
 * @return 0, or a negative errno (info->stage says which step failed).
 */
GT__WUR int gt__convert_file(const char *path, struct gt__consumer *const *consumers,
                             size_t n, struct gt__convert_info *info);

#endif /* GRADTRACE_DAEMON_CONSUMER_H */
