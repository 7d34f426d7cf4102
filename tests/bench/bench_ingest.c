/*
 * Sustained agent -> daemon throughput: several simulated agents stream
 * pre-encoded chunks through a real gradtraced (started here with private
 * sockets) which decodes and converts them to Chrome JSON. Prints events/s
 * end to end (first byte sent -> shutdown reply, i.e. every trace finished)
 * and, in the lossy mode, how many events agents had to drop because the
 * daemon's socket was full — the real agent's behaviour. Also prints the
 * decode-only rate of the same bytes in this process, to show where the
 * time goes. Never fails on time.
 *
 *   bench_ingest [AGENTS [CHUNKS [RECORDS]]]   (default 4 200 4000)
 *
 * Four runs: blocking sends as fast as possible from one agent and from
 * all of them (the daemon's ceiling, no loss by construction; targets
 * >= 10 M records/s per agent and >= 20 M/s over four agents); one agent
 * offering 10 M records/s (the design budget per process) at a steady
 * pace with the agent's drop-when-full policy; every agent offering
 * 2.5 M records/s the same way. Each run prints the daemon's peak RSS.
 *   env BUILD: build directory holding gradtraced (default build)
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "common/codec.h"

struct stream {
    uint8_t *bytes;        /* hello + chunks, back to back */
    size_t len;
    size_t *chunk_off;     /* offset of chunk i; chunk_off[n] = len */
    size_t nchunks;
    int rank;
    const char *sock;
    int lossy;
    double rate;           /* lossy mode: offered records/s for this agent */
    uint64_t dropped_chunks;
    uint64_t sent_bytes;
};

static unsigned records_per_chunk;

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int append(struct stream *s, size_t *cap, const void *p, size_t n)
{
    if (s->len + n > *cap) {
        size_t nc = (*cap + n) * 2;
        uint8_t *nb = realloc(s->bytes, nc);

        if (!nb)
            return -1;
        s->bytes = nb;
        *cap = nc;
    }
    memcpy(s->bytes + s->len, p, n);
    s->len += n;
    return 0;
}

/* A training-like mix: scope pairs on one thread, increasing times. */
static int build_stream(struct stream *s, int rank, size_t nchunks)
{
    struct gt_hello hf = {.pid = (uint32_t)getpid(), .ppid = (uint32_t)getppid(),
                          .rank = rank, .local_rank = rank, .world_size = 64};
    static const char cmd[] = "bench_ingest";
    uint8_t hello[GT_HELLO_MAX_SIZE];
    struct gt__recbuf rb = {0};
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    size_t cap = 0, out_cap = gt__chunk_bound(records_per_chunk * 24u + 256);
    uint8_t *out = malloc(out_cap);
    uint64_t ts = 1000000000ull;
    ssize_t n;

    memset(s, 0, sizeof(*s));
    s->rank = rank;
    s->chunk_off = calloc(nchunks + 1, sizeof(size_t));
    n = gt__hello_encode(&hf, "benchhost", cmd, sizeof(cmd) - 1, hello, sizeof(hello));
    if (!out || !cctx || !s->chunk_off || n < 0 || append(s, &cap, hello, (size_t)n) < 0)
        return -1;
    for (size_t c = 0; c < nchunks; c++) {
        struct gt_r_thread th = {.h = {GT_R_THREAD, sizeof(th)}, .tid = 1000u + (uint32_t)rank};

        gt__recbuf_reset(&rb);
        if (gt__recbuf_string(&rb, 1, "forward", 7) < 0 ||
            gt__recbuf_append(&rb, &th, sizeof(th)) < 0)
            return -1;
        for (unsigned i = 0; i + 1 < records_per_chunk; i += 2) {
            struct gt_r_scope_begin b = {.h = {GT_R_SCOPE_BEGIN, sizeof(b)},
                                         .kind = GT_SCOPE_USER, .name = 1, .ts = ts};
            struct gt_r_scope_end e = {.h = {GT_R_SCOPE_END, sizeof(e)},
                                       .kind = GT_SCOPE_USER, .name = 1,
                                       .ts = ts + 700 + (i & 63)};

            ts += 1000 + (i & 127);
            if (gt__recbuf_append(&rb, &b, sizeof(b)) < 0 ||
                gt__recbuf_append(&rb, &e, sizeof(e)) < 0)
                return -1;
        }
        n = gt__chunk_encode(cctx, 1, rb.data, rb.len, rb.count, c, ts, out, out_cap);
        s->chunk_off[c] = s->len;
        if (n < 0 || append(s, &cap, out, (size_t)n) < 0)
            return -1;
    }
    s->chunk_off[nchunks] = s->len;
    s->nchunks = nchunks;
    gt__recbuf_free(&rb);
    ZSTD_freeCCtx(cctx);
    free(out);
    return 0;
}

static int connect_to(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

static int send_all(int fd, const uint8_t *p, size_t len)
{
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static void *agent_thread(void *arg)
{
    struct stream *s = arg;
    int fd = connect_to(s->sock);

    if (fd < 0)
        return NULL;
    double t0 = now_s();

    if (send_all(fd, s->bytes, s->chunk_off[0]) < 0)
        goto out_close;
    s->sent_bytes = s->chunk_off[0];
    for (size_t c = 0; c < s->nchunks; c++) {
        const uint8_t *p = s->bytes + s->chunk_off[c];
        size_t len = s->chunk_off[c + 1] - s->chunk_off[c];

        if (s->lossy) {
            /* Offer chunks at a steady rate, as a training job would. */
            double due = t0 + (double)c * records_per_chunk / s->rate, t = now_s();

            if (due > t)
                usleep((useconds_t)((due - t) * 1e6));
            /* The real streamer: a chunk that cannot start now is dropped. */
            ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);

            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                s->dropped_chunks++;
                continue;
            }
            if (n < 0 || send_all(fd, p + n, len - (size_t)n) < 0)
                break;
        } else if (send_all(fd, p, len) < 0) {
            break;
        }
        s->sent_bytes += len;
    }
out_close:
    close(fd);
    return NULL;
}

static int request(const char *ctl, const char *line, char *reply, size_t cap)
{
    int fd = connect_to(ctl);
    ssize_t n;
    size_t have = 0;

    if (fd < 0)
        return -1;
    if (send_all(fd, (const uint8_t *)line, strlen(line)) < 0) {
        close(fd);
        return -1;
    }
    while (have + 1 < cap && (n = read(fd, reply + have, cap - have - 1)) > 0) {
        have += (size_t)n;
        if (memchr(reply, '\n', have))
            break;
    }
    reply[have] = '\0';
    close(fd);
    return have ? 0 : -1;
}

static pid_t start_daemon(const char *build, const char *dir, char *sock, char *ctl)
{
    char exe[4096], out[4200];
    pid_t pid;

    snprintf(exe, sizeof(exe), "%s/gradtraced", build);
    snprintf(sock, 108, "%s/agent.sock", dir);
    snprintf(ctl, 108, "%s/control.sock", dir);
    snprintf(out, sizeof(out), "%s/out", dir);
    pid = fork();
    if (pid == 0) {
        setenv("GRADTRACE_SOCKET", sock, 1);
        setenv("GRADTRACE_CONTROL", ctl, 1);
        if (!freopen("/dev/null", "w", stderr))
            _exit(127);
        execl(exe, "gradtraced", "--foreground", "--output-dir", out, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 500; i++) {
        char r[256];

        if (request(ctl, "{\"cmd\":\"status\"}\n", r, sizeof(r)) == 0)
            return pid;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    return -1;
}

static int on_chunk_count(void *ud, const struct gt_chunk_header *h,
                          const uint8_t *rec, size_t n)
{
    (void)rec;
    (void)n;
    *(uint64_t *)ud += h->record_count;
    return 0;
}

/* Decode-only rate of one stream, no sockets, no JSON. */
static double decode_rate(const struct stream *s)
{
    uint64_t recs = 0;
    double t0 = now_s();
    struct gt__framer *f = gt__framer_create(GT__FRAMER_STRICT, NULL, on_chunk_count, &recs);

    if (!f || gt__framer_feed(f, s->bytes, s->len) < 0 || gt__framer_finish(f) < 0) {
        gt__framer_free(f);
        return 0;
    }
    gt__framer_free(f);
    return (double)recs / (now_s() - t0);
}

static int run(const char *build, int nagents, int lossy, double rate,
               struct stream *streams)
{
    char dir[] = "/tmp/gt-bench-ingest-XXXXXX", sock[108], ctl[108], reply[65536];
    char cmd[4200];
    pthread_t th[64];
    uint64_t events = 0, dropped = 0, bytes = 0;
    double t0, t1;
    pid_t d;
    int status;

    if (!mkdtemp(dir))
        return -1;
    d = start_daemon(build, dir, sock, ctl);
    if (d < 0) {
        fprintf(stderr, "bench_ingest: cannot start %s/gradtraced\n", build);
        return -1;
    }
    t0 = now_s();
    for (int i = 0; i < nagents; i++) {
        streams[i].sock = sock;
        streams[i].lossy = lossy;
        streams[i].rate = rate;
        streams[i].dropped_chunks = 0;
        pthread_create(&th[i], NULL, agent_thread, &streams[i]);
    }
    for (int i = 0; i < nagents; i++)
        pthread_join(th[i], NULL);
    /* Shutdown answers after every agent's data is read and converted. */
    if (request(ctl, "{\"cmd\":\"shutdown\"}\n", reply, sizeof(reply)) < 0)
        fprintf(stderr, "bench_ingest: no shutdown reply\n");
    t1 = now_s();
    struct rusage ru = {0};
    wait4(d, &status, 0, &ru);
    for (int i = 0; i < nagents; i++) {
        events += (uint64_t)(streams[i].nchunks - streams[i].dropped_chunks) * records_per_chunk;
        dropped += streams[i].dropped_chunks * records_per_chunk;
        bytes += streams[i].sent_bytes;
    }
    if (lossy)
        printf("  paced, offered %.1f M records/s per agent (%.1f M/s total), drop when the "
               "socket is full:\n", rate / 1e6, rate * nagents / 1e6);
    else
        printf("  as fast as possible, blocking sends (no loss by construction; target "
               ">= %d M records/s):\n", nagents == 1 ? 10 : 20);
    printf("    %d agents: %6.2f M records/s delivered and converted, %6.1f MB/s wire, "
           "lost %llu records (%.1f%%), %.2f s, daemon peak RSS %.1f MB\n",
           nagents, (double)events / (t1 - t0) / 1e6,
           (double)bytes / (t1 - t0) / 1e6, (unsigned long long)dropped,
           100.0 * (double)dropped / (double)(events + dropped), t1 - t0,
           (double)ru.ru_maxrss / 1024.0);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_ingest: could not remove %s\n", dir);
    return 0;
}

int main(int argc, char **argv)
{
    int nagents = argc > 1 ? atoi(argv[1]) : 4;
    size_t nchunks = argc > 2 ? (size_t)atol(argv[2]) : 200;
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    struct stream *streams;

    records_per_chunk = argc > 3 ? (unsigned)atoi(argv[3]) : 4000;
    if (nagents < 1 || nagents > 64 || nchunks < 1 || records_per_chunk < 4) {
        fprintf(stderr, "usage: bench_ingest [AGENTS<=64 [CHUNKS [RECORDS]]]\n");
        return 2;
    }
    streams = calloc((size_t)nagents, sizeof(*streams));
    for (int i = 0; i < nagents; i++)
        if (!streams || build_stream(&streams[i], i, nchunks) < 0) {
            fprintf(stderr, "bench_ingest: cannot build streams\n");
            return 1;
        }
    printf("agent -> daemon ingest: %d agents x %zu chunks x %u records "
           "(%.1f MB compressed per agent)\n", nagents, nchunks, records_per_chunk,
           (double)streams[0].len / 1e6);
    printf("  decode only (this process, 1 core): %.1f M records/s\n",
           decode_rate(&streams[0]) / 1e6);
    /* The daemon's ceiling; one process offering the design's 10 M/s;
     * all agents offering 2.5 M/s each. */
    if (run(build, 1, 0, 0, streams) < 0 ||
        run(build, nagents, 0, 0, streams) < 0 ||
        run(build, 1, 1, 10e6, streams) < 0 ||
        run(build, nagents, 1, 2.5e6, streams) < 0)
        return 1;
    for (int i = 0; i < nagents; i++) {
        free(streams[i].bytes);
        free(streams[i].chunk_off);
    }
    free(streams);
    return 0;
}
