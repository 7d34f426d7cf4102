/*
 * The consumer interface's Chrome-JSON consumer and gt__convert_file, the
 * one path from a recorded file to consumers (`gradtrace convert`, `gradtrace
 * report` on a .gtr, tests).
 *
 * gt__convert_file reads fixed blocks into a framer in resync mode, which
 * calls back with the hello and each decoded chunk; each callback feeds
 * every consumer in turn and the first consumer error stops the framer. The end
 * of input (truncation, framer statistics) goes to every consumer's finish,
 * and only when a hello was read: without one there is no stream.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "daemon/convert/consumer.h"

#define BLOCK (4u << 20)

void gt__consumer_free(struct gt__consumer *k)
{
    if (k)
        k->ops->free(k);
}

/* ------------------------------------------------------------ chrome */

struct chrome_consumer {
    struct gt__consumer base;
    struct gt__conv *conv;
};

static int chrome_hello(struct gt__consumer *k, const struct gt__hello_info *h)
{
    return gt__conv_hello(((struct chrome_consumer *)k)->conv, h);
}

static int chrome_chunk(struct gt__consumer *k, const struct gt_chunk_header *h,
                        const uint8_t *records, size_t raw_size)
{
    return gt__conv_chunk(((struct chrome_consumer *)k)->conv, h, records,
                          raw_size);
}

static int chrome_finish(struct gt__consumer *k,
                         const struct gt__framer_stats *stats, int truncated)
{
    return gt__conv_finish(((struct chrome_consumer *)k)->conv, stats, truncated);
}

static void chrome_free(struct gt__consumer *k)
{
    struct chrome_consumer *c = (struct chrome_consumer *)k;
    gt__conv_free(c->conv);
    gt__free(c);
}

static const struct gt__consumer_ops chrome_ops = {
    .hello = chrome_hello,
    .chunk = chrome_chunk,
    .finish = chrome_finish,
    .free = chrome_free,
};

struct gt__consumer *gt__chrome_consumer_create(const struct gt__conv_opts *opts)
{
    struct chrome_consumer *c = gt__calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->base.ops = &chrome_ops;
    c->conv = gt__conv_create(opts);
    if (!c->conv) {
        int e = errno;
        gt__free(c);
        errno = e;
        return NULL;
    }
    return &c->base;
}

struct gt__conv *gt__chrome_consumer_conv(struct gt__consumer *k)
{
    return k->ops == &chrome_ops ? ((struct chrome_consumer *)k)->conv : NULL;
}

/* ------------------------------------------------------------ files */

struct feed {
    struct gt__consumer *const *consumers;
    size_t n;
    int err;    /* first consumer error */
};

static int feed_hello(void *ud, const struct gt__hello_info *hello)
{
    struct feed *f = ud;
    for (size_t i = 0; i < f->n && !f->err; i++)
        f->err = f->consumers[i]->ops->hello(f->consumers[i], hello);
    return f->err;
}

static int feed_chunk(void *ud, const struct gt_chunk_header *h,
                      const uint8_t *records, size_t raw_size)
{
    struct feed *f = ud;
    for (size_t i = 0; i < f->n && !f->err; i++)
        f->err = f->consumers[i]->ops->chunk(f->consumers[i], h, records, raw_size);
    return f->err;
}

/* Reads fd to its end into the framer. @return 0 or a negative errno
 * (info->stage set). */
static int feed_all(int fd, struct gt__framer *fr, uint8_t *buf,
                    const struct feed *f, struct gt__convert_info *info)
{
    for (;;) {
        ssize_t n = read(fd, buf, BLOCK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            info->stage = GT__CONVERT_OPEN;
            return -errno;
        }
        if (n == 0)
            return 0;
        info->read += (uint64_t)n;
        int rc = gt__framer_feed(fr, buf, (size_t)n);
        if (rc) {
            info->stage = f->err ? GT__CONVERT_CONSUMER : GT__CONVERT_STREAM;
            return rc;
        }
        if (info->progress)
            info->progress(info->progress_ud, info->read, info->size);
    }
}

/* The end of input, into every consumer. */
static int finish_all(struct gt__framer *fr, struct feed *f,
                      struct gt__convert_info *info)
{
    int fin = gt__framer_finish(fr);
    info->stats = *gt__framer_stats(fr);
    if (!gt__framer_hello(fr)) {
        info->stage = GT__CONVERT_NO_HELLO;
        return -EINVAL;
    }
    info->truncated = fin == GT__ETRUNC;
    for (size_t i = 0; i < f->n && !f->err; i++)
        f->err = f->consumers[i]->ops->finish(f->consumers[i], &info->stats,
                                          info->truncated);
    if (f->err)
        info->stage = GT__CONVERT_CONSUMER;
    return f->err;
}

int gt__convert_file(const char *path, struct gt__consumer *const *consumers,
                     size_t n, struct gt__convert_info *info)
{
    struct feed f = {consumers, n, 0};
    struct gt__framer *fr = NULL;
    uint8_t *buf = NULL;
    struct stat st;
    int rc;

    info->stage = GT__CONVERT_OPEN;
    info->size = info->read = 0;
    info->truncated = 0;
    memset(&info->stats, 0, sizeof(info->stats));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    info->size = fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
    rc = -ENOMEM;
    buf = gt__malloc(BLOCK);
    fr = gt__framer_create(GT__FRAMER_RESYNC, feed_hello, feed_chunk, &f);
    if (!buf || !fr)
        goto out;
    rc = feed_all(fd, fr, buf, &f, info);
    if (rc == 0 && (rc = finish_all(fr, &f, info)) == 0)
        info->stage = GT__CONVERT_DONE;
out:
    gt__framer_free(fr);
    gt__free(buf);
    close(fd);
    return rc;
}
