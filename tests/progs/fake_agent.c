/*
 * fake_agent: a test client that speaks the agent protocol with the real
 * codec, for daemon tests and the ingest benchmark — and that can lie.
 *
 *   fake_agent [options]
 *     --socket PATH       agent socket (default: as agents find it)
 *     --chunks N          chunks to send (default 4)
 *     --records N         records per chunk, scope begin/end pairs (default 1000)
 *     --rank R            hello rank (default -1)
 *     --cmd TEXT          hello command line (argv[0] text; default "fake_agent")
 *     --mode MODE         normal | bad-magic | bad-version | bad-crc | huge-chunk |
 *                         garbage | mid-chunk (send the chunks, then half of one
 *                         more and die by SIGKILL) | hello-only
 *     --gap N             skip N sequence numbers before the last chunk
 *     --lost N            report N lost events in a GT_R_LOST record
 *     --hold-ms MS        stay connected MS ms after sending (default 0)
 *     --no-goodbye        end the last chunk without GT_R_GOODBYE (as a
 *                         killed process would); other modes than normal
 *                         never send one
 *     --print-ctl         print daemon control messages on stdout:
 *                         "ctl <type> <text>", one per line (ACKs only
 *                         with --print-acks)
 *     --dump FILE         write every byte sent to FILE as well
 *     --nonblock          send like the real agent: a chunk that does not
 *                         fit the socket now is dropped and counted
 *     --level L           zstd level (default 1; 0 = raw chunks)
 *
 * Records are well-formed scope pairs on one thread with increasing
 * timestamps, so a converter output can be checked for completeness:
 * every chunk holds records/2 complete "fake_scope" spans.
 * Exit status 0 when everything was sent (and, with --print-ctl, the
 * welcome arrived), 1 otherwise. On stderr: one summary line.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "common/codec.h"
#include "common/paths.h"

static int sock = -1;
static int dump_fd = -1;
static int nonblock;
static unsigned long long dropped;

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int send_bytes(const void *buf, size_t len)
{
    const char *p = buf;

    if (dump_fd >= 0 && write(dump_fd, buf, len) != (ssize_t)len)
        return -1;
    while (len) {
        ssize_t n = send(sock, p, len, MSG_NOSIGNAL);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Like the real streamer: a chunk the socket cannot take right now is
 * dropped and counted; one that started going out is finished, since a
 * partial chunk would corrupt the stream. */
static int send_chunk(const void *buf, size_t len)
{
    ssize_t n;

    if (!nonblock)
        return send_bytes(buf, len);
    n = send(sock, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        dropped++;
        return 0;
    }
    if (n < 0)
        return -1;
    if (dump_fd >= 0 && write(dump_fd, buf, (size_t)n) != n)
        return -1;
    return (size_t)n < len ? send_bytes((const char *)buf + n, len - (size_t)n) : 0;
}

static int print_acks;

static void print_ctl(int hold_ms)
{
    uint64_t end = now_ns() + (uint64_t)hold_ms * 1000000ull;
    uint8_t buf[GT_CTL_MAX_SIZE * 4];
    size_t have = 0;

    for (;;) {
        uint64_t t = now_ns();
        struct pollfd p = {.fd = sock, .events = POLLIN};
        ssize_t n;

        if (t >= end)
            return;
        if (poll(&p, 1, (int)((end - t) / 1000000ull) + 1) <= 0)
            continue;
        n = recv(sock, buf + have, sizeof(buf) - have, 0);
        if (n <= 0)
            return;
        have += (size_t)n;
        while (have >= sizeof(struct gt_ctl)) {
            struct gt_ctl c;

            memcpy(&c, buf, sizeof(c));
            if (c.magic != GT_CTL_MAGIC || c.size < sizeof(c)) {
                printf("ctl bad-message\n");
                fflush(stdout);
                return;
            }
            if (have < c.size)
                break;
            if (c.type != GT_CTL_ACK || print_acks)
                printf("ctl %u %.*s\n", (unsigned)c.type,
                       (int)(c.size - sizeof(c)), (const char *)buf + sizeof(c));
            fflush(stdout);
            memmove(buf, buf + c.size, have - c.size);
            have -= c.size;
        }
    }
}

/* One chunk's records: strings and thread info first (every chunk, so any
 * chunk decodes alone), then scope pairs. */
static int build_records(struct gt__recbuf *b, unsigned nrec, uint64_t *ts,
                         uint64_t lost)
{
    struct gt_r_thread_info ti = {.h = {GT_R_THREAD_INFO, sizeof(ti)},
                                  .tid = (uint32_t)getpid(), .name = 1};
    struct gt_r_thread th = {.h = {GT_R_THREAD, sizeof(th)}, .tid = (uint32_t)getpid()};

    gt__recbuf_reset(b);
    if (gt__recbuf_string(b, 1, "fake_main", 9) < 0 ||
        gt__recbuf_string(b, 2, "fake_scope", 10) < 0 ||
        gt__recbuf_append(b, &ti, sizeof(ti)) < 0 ||
        gt__recbuf_append(b, &th, sizeof(th)) < 0)
        return -1;
    if (lost) {
        struct gt_r_lost l = {.h = {GT_R_LOST, sizeof(l)}, .tid = (uint32_t)getpid(),
                              .what = GT_LOST_EVENTS, .count = lost};

        if (gt__recbuf_append(b, &l, sizeof(l)) < 0)
            return -1;
    }
    for (unsigned i = 0; i + 1 < nrec; i += 2) {
        struct gt_r_scope_begin sb = {.h = {GT_R_SCOPE_BEGIN, sizeof(sb)},
                                      .kind = GT_SCOPE_USER, .name = 2, .ts = *ts};
        struct gt_r_scope_end se = {.h = {GT_R_SCOPE_END, sizeof(se)},
                                    .kind = GT_SCOPE_USER, .name = 2, .ts = *ts + 500};

        *ts += 1000;
        if (gt__recbuf_append(b, &sb, sizeof(sb)) < 0 ||
            gt__recbuf_append(b, &se, sizeof(se)) < 0)
            return -1;
    }
    return 0;
}

static int connect_to(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};

    if (strlen(path) >= sizeof(sa.sun_path))
        return -1;
    strcpy(sa.sun_path, path);
    sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock < 0 || connect(sock, (struct sockaddr *)&sa, sizeof(sa)) != 0)
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'}, {"chunks", required_argument, NULL, 'c'},
        {"records", required_argument, NULL, 'r'}, {"rank", required_argument, NULL, 'R'},
        {"cmd", required_argument, NULL, 'C'}, {"mode", required_argument, NULL, 'm'},
        {"gap", required_argument, NULL, 'g'}, {"lost", required_argument, NULL, 'l'},
        {"hold-ms", required_argument, NULL, 'H'}, {"no-goodbye", no_argument, NULL, 'G'},
        {"print-acks", no_argument, NULL, 'A'}, {"print-ctl", no_argument, NULL, 'P'},
        {"dump", required_argument, NULL, 'D'}, {"nonblock", no_argument, NULL, 'N'},
        {"level", required_argument, NULL, 'L'}, {NULL, 0, NULL, 0},
    };
    char path[4096];
    const char *mode = "normal", *cmd = "fake_agent", *dump = NULL;
    unsigned long chunks = 4, nrec = 1000, gap = 0, lost = 0;
    int rank = -1, hold_ms = 0, print = 0, level = 1, goodbye = 1, c;
    struct gt_hello hf = {0};
    struct gt__recbuf rb = {0};
    uint8_t hello[GT_HELLO_MAX_SIZE];
    uint8_t *out;
    size_t out_cap;
    ssize_t n;
    uint64_t ts, seq = 0;
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    char host[256] = "fakehost";

    if (gt__agent_socket_path(path, sizeof(path)) < 0)
        path[0] = '\0';
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 's': snprintf(path, sizeof(path), "%s", optarg); break;
        case 'c': chunks = strtoul(optarg, NULL, 10); break;
        case 'r': nrec = strtoul(optarg, NULL, 10); break;
        case 'R': rank = atoi(optarg); break;
        case 'C': cmd = optarg; break;
        case 'm': mode = optarg; break;
        case 'g': gap = strtoul(optarg, NULL, 10); break;
        case 'l': lost = strtoul(optarg, NULL, 10); break;
        case 'H': hold_ms = atoi(optarg); break;
        case 'G': goodbye = 0; break;
        case 'A': print_acks = 1; break;
        case 'P': print = 1; break;
        case 'D': dump = optarg; break;
        case 'N': nonblock = 1; break;
        case 'L': level = atoi(optarg); break;
        default: fprintf(stderr, "fake_agent: bad option\n"); return 2;
        }
    }
    if (connect_to(path) < 0) {
        fprintf(stderr, "fake_agent: connect %s: %s\n", path, strerror(errno));
        return 1;
    }
    if (dump)
        dump_fd = open(dump, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    gethostname(host, sizeof(host) - 1);
    ts = now_ns();
    hf.pid = (uint32_t)getpid();
    hf.ppid = (uint32_t)getppid();
    hf.rank = rank;
    hf.local_rank = -1;
    hf.world_size = rank >= 0 ? rank + 1 : -1;
    hf.flags = GT_HELLO_CAPTURE;
    hf.start_mono_ns = ts;
    hf.start_real_ns = 0;
    n = gt__hello_encode(&hf, host, cmd, strlen(cmd), hello, sizeof(hello));
    if (n < 0)
        return 1;
    if (strcmp(mode, "bad-magic") == 0)
        hello[0] = 'X';
    if (strcmp(mode, "bad-version") == 0) {
        uint16_t major = 99;

        memcpy(hello + 8, &major, 2);
    }
    if (strcmp(mode, "garbage") == 0) {
        for (size_t i = 0; i < sizeof(hello); i++)
            hello[i] = (uint8_t)(i * 7 + 13);
        n = sizeof(hello);
    }
    if (send_bytes(hello, (size_t)n) < 0)
        goto out_fail;
    if (strcmp(mode, "hello-only") == 0)
        chunks = 0;

    out_cap = gt__chunk_bound(nrec * 24 + 256);
    out = malloc(out_cap);
    for (unsigned long i = 0; out && i < chunks; i++) {
        if (build_records(&rb, (unsigned)nrec, &ts, i + 1 == chunks ? lost : 0) < 0)
            goto out_fail;
        if (gap && i + 1 == chunks)
            seq += gap;
        if (goodbye && i + 1 == chunks && strcmp(mode, "normal") == 0) {
            struct gt_r_goodbye g = {.h = {GT_R_GOODBYE, sizeof(g)}, .ts = ts};

            if (gt__recbuf_append(&rb, &g, sizeof(g)) < 0)
                goto out_fail;
        }
        n = gt__chunk_encode(cctx, level, rb.data, rb.len, rb.count, seq++, ts, out,
                            out_cap);
        if (n < 0)
            goto out_fail;
        if (strcmp(mode, "bad-crc") == 0 && i + 1 == chunks)
            out[n - 1] ^= 0x5a;
        if (strcmp(mode, "huge-chunk") == 0 && i + 1 == chunks) {
            uint32_t huge = 0xfffffff0u;

            memcpy(out + offsetof(struct gt_chunk_header, payload_size), &huge, 4);
        }
        if (send_chunk(out, (size_t)n) < 0)
            goto out_fail;
    }
    if (strcmp(mode, "mid-chunk") == 0 && out) {
        /* Half a chunk, then die the way a crashed process dies. */
        if (build_records(&rb, (unsigned)nrec, &ts, 0) < 0)
            goto out_fail;
        n = gt__chunk_encode(cctx, level, rb.data, rb.len, rb.count, seq++, ts, out,
                            out_cap);
        if (n < 0 || send_bytes(out, (size_t)n / 2) < 0)
            goto out_fail;
        fprintf(stderr, "fake_agent pid %d: sent %lu chunks and half of one\n",
                (int)getpid(), chunks);
        raise(SIGKILL);
    }
    if (print || hold_ms)
        print_ctl(hold_ms ? hold_ms : 1000);
    fprintf(stderr, "fake_agent pid %d: sent %lu chunks of %lu records, dropped %llu\n",
            (int)getpid(), chunks, nrec, dropped);
    free(out);
    gt__recbuf_free(&rb);
    ZSTD_freeCCtx(cctx);
    return 0;
out_fail:
    fprintf(stderr, "fake_agent pid %d: send failed: %s\n", (int)getpid(), strerror(errno));
    return 1;
}
