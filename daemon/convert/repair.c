/*
 * Repair of unfinished trace files (repair.h).
 *
 * The converter writes `{"traceEvents":[` then one event per line, each
 * a JSON object, then `\n],` and the metadata, ending `}\n}\n`. A scan
 * that knows strings and escapes finds the end of each whole event at
 * array depth; the last one is where the file is cut back to. The tail
 * then written holds what the validator and readers need (time unit,
 * base time 0: unknown, the gradtrace object with every anomaly key) and
 * says the file was repaired and truncated.
 *
 * The bytes are also fed to the strict JSON checker (jsonchk.h): a file
 * damaged inside (a flipped byte, a foreign line, the zeros a lost power
 * leaves) is treated as cut at its first byte that is not JSON, so a
 * repaired file is always valid JSON; bytes after a whole document are
 * cut off.
 *
 * A daemon's file carries acknowledgement marks (convert.h, ack_marks): a
 * TAB at array depth, outside any event, where the agent was told all
 * before it is written. The writer puts no TAB there otherwise (strings
 * escape it), so with a mark the file is cut back to the last one: what
 * follows it came from chunks the agent counts as lost.
 */
#include "daemon/convert/repair.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "common/version.h"
#include "daemon/convert/cstream.h"
#include "daemon/convert/jsonchk.h"

#define HEAD "{\"traceEvents\":["
#define HEAD_LEN (sizeof(HEAD) - 1)

/* Scanner state over the bytes after HEAD. */
struct scan {
    int depth;            /* 0: in the array, between events */
    int in_str, esc;
    int closed;           /* the array's ']' was seen */
    int whole;            /* ...and the document's last '}' */
    int tail_depth;       /* depth inside the metadata */
    uint64_t good;        /* offset just after the last whole event */
    uint64_t prev_good;   /* the one before it */
    uint64_t ev_start;    /* offset of the event being read */
    uint64_t last_start;  /* start of the last whole event */
    uint64_t events;
    uint64_t array_end;   /* offset just after ']' */
    int after_comma;      /* a ',' since the last whole event */
    int marked;           /* an acknowledgement mark was seen */
    uint64_t mark;        /* offset of the last one */
    uint64_t mark_events; /* whole events before it */
    uint64_t whole_end;   /* offset just after the document's last '}' */
    int damaged;          /* a byte that is not JSON, at damaged_at */
    uint64_t damaged_at;
    struct gt__jchk chk;
};

/* Inside a JSON string: follows escapes to its closing quote.
 * @return 1 when ch belonged to a string (or ended one). */
static int scan_string(struct scan *s, char ch)
{
    if (!s->in_str)
        return 0;
    if (s->esc)
        s->esc = 0;
    else if (ch == '\\')
        s->esc = 1;
    else if (ch == '"')
        s->in_str = 0;
    return 1;
}

static void scan_tail(struct scan *s, char ch)
{
    if (scan_string(s, ch))
        return;
    if (ch == '"')
        s->in_str = 1;
    else if (ch == '{' || ch == '[')
        s->tail_depth++;
    else if (ch == '}' || ch == ']') {
        if (s->tail_depth == 0)
            s->whole = 1; /* the document's closing brace */
        else
            s->tail_depth--;
    }
}

static void scan_byte(struct scan *s, char ch, uint64_t off)
{
    if (s->closed) {
        scan_tail(s, ch);
        return;
    }
    if (scan_string(s, ch))
        return;
    if (ch == '"') {
        s->in_str = 1;
    } else if (ch == '{' || ch == '[') {
        if (s->depth++ == 0)
            s->ev_start = off;
    } else if (ch == '}' || (ch == ']' && s->depth > 0)) {
        if (--s->depth == 0) {
            s->prev_good = s->good;
            s->good = off + 1;
            s->last_start = s->ev_start;
            s->events++;
            s->after_comma = 0;
        }
    } else if (ch == ']') {
        s->closed = 1;
        s->array_end = off + 1;
    } else if (ch == ',' && s->depth == 0) {
        s->after_comma = 1;
    } else if (ch == '\t' && s->depth == 0 && !s->after_comma) {
        /* The writer marks right after an event (or the '['), never
         * after the ',' before the next one: cut there, the file would
         * end in a ','. */
        s->marked = 1;
        s->mark = off;
        s->mark_events = s->events;
    }
}

/* Whether the event at [start, end) of fd is a flow start ("ph":"s"),
 * whose finish, written right after it, was lost. */
static int is_flow_start(int fd, uint64_t start)
{
    char buf[16];
    ssize_t n = pread(fd, buf, sizeof(buf), (off_t)start);

    return n >= 9 && memcmp(buf, "{\"ph\":\"s\"", 9) == 0;
}

static void put_tail(char *buf, size_t cap, uint64_t events, int close_array)
{
    size_t n = (size_t)snprintf(
        buf, cap,
        "%s,\n\"displayTimeUnit\":\"ns\",\n\"baseTimeNanoseconds\":0,\n"
        "\"gradtrace\":{\"converter\":\"gradtrace " GT__VERSION "\","
        "\"converter_version\":\"" GT__VERSION "\",\"wire_major\":%u,"
        "\"wire_minor\":%u,\"file_index\":0,\"file_count\":null,"
        "\"next_file\":null,\"events\":%llu,\"repaired\":true,"
        "\"lost\":{\"events\":0,\"cupti\":0,\"chunks\":0},"
        "\"stream\":{\"truncated\":true,\"complete\":false,\"goodbye\":false},"
        "\"anomalies\":{",
        close_array ? "\n]" : "", (unsigned)GT_WIRE_MAJOR,
        (unsigned)GT_WIRE_MINOR, (unsigned long long)events);
    const char *sep = "";
#define GT__ANOM_PUT(f)                                                    \
    n += (size_t)snprintf(buf + n, cap - n, "%s\"" #f "\":0", sep);       \
    sep = ",";
    GT__ANOMALIES(GT__ANOM_PUT)
#undef GT__ANOM_PUT
    snprintf(buf + n, cap - n, "}}\n}\n");
}

/* Scans fd past HEAD, to its end or its first byte that is not JSON.
 * @return 0 or -errno. */
static int scan_file(int fd, struct scan *s)
{
    char buf[1 << 16];
    uint64_t off = HEAD_LEN;
    ssize_t n;

    memset(s, 0, sizeof(*s));
    s->good = HEAD_LEN;
    gt__jchk_init(&s->chk);
    for (size_t i = 0; i < HEAD_LEN; i++)
        (void)gt__jchk_byte(&s->chk, (unsigned char)HEAD[i]);
    while ((n = pread(fd, buf, sizeof(buf), (off_t)off)) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            if (gt__jchk_byte(&s->chk, (unsigned char)buf[i]) < 0) {
                s->damaged = 1;
                s->damaged_at = off + (uint64_t)i;
                return 0;
            }
            if (s->whole)
                continue; /* only whitespace may follow */
            scan_byte(s, buf[i], off + (uint64_t)i);
            if (s->whole)
                s->whole_end = off + (uint64_t)i + 1;
        }
        off += (uint64_t)n;
    }
    return n < 0 ? -errno : 0;
}

/* Cuts fd at `at` and writes the tail. */
static int finish_file(int fd, uint64_t at, uint64_t events, int close_array)
{
    char tail[4096];

    put_tail(tail, sizeof(tail), events, close_array);
    if (ftruncate(fd, (off_t)at) != 0 || lseek(fd, (off_t)at, SEEK_SET) < 0)
        return -errno;
    return gt__write_all(fd, tail, strlen(tail), 0, 0);
}

int gt__trace_repair_fd(int fd, struct gt__repair_info *info, int marks)
{
    char head[HEAD_LEN];
    struct scan s;
    struct stat st;
    int rc;
    ssize_t n;

    memset(info, 0, sizeof(*info));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = -EINVAL;
        goto out;
    }
    /* A live writer (another daemon) holds a shared lock on its file. */
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
        goto out;
    }
    n = pread(fd, head, HEAD_LEN, 0);
    if (n < 0) {
        rc = -errno;
        goto out;
    }
    /* Empty, or cut inside the head: an empty trace. Anything else that
     * does not start like ours is not ours to touch. */
    if ((size_t)n < HEAD_LEN) {
        if (memcmp(head, HEAD, (size_t)n) != 0) {
            rc = -EINVAL;
            goto out;
        }
        if (ftruncate(fd, 0) != 0 || gt__write_all(fd, HEAD, HEAD_LEN, 0, 0) != 0) {
            rc = -EIO;
            goto out;
        }
        info->cut_bytes = 0;
        rc = finish_file(fd, HEAD_LEN, 0, 1);
        goto out_done;
    }
    if (memcmp(head, HEAD, HEAD_LEN) != 0) {
        rc = -EINVAL;
        goto out;
    }
    if ((rc = scan_file(fd, &s)) < 0)
        goto out;
    if (s.whole && !s.damaged) {
        rc = 0;
        goto out;
    }
    if (s.whole) {
        /* Something after a whole document: cut it off. */
        info->events = s.events;
        info->cut_bytes = (uint64_t)st.st_size - s.whole_end;
        if (ftruncate(fd, (off_t)s.whole_end) != 0 ||
            pwrite(fd, "\n", 1, (off_t)s.whole_end) != 1)
            rc = errno ? -errno : -EIO;
        goto out_done;
    }
    if (s.marked && marks) {
        /* Only what the agent was told is written stays. The mark stays
         * too (JSON whitespace): a tail a full disk cuts short is tried
         * again later, and that try must find the same mark, not the one
         * before it. */
        info->events = s.mark_events;
        info->cut_bytes = (uint64_t)st.st_size - (s.mark + 1);
        rc = finish_file(fd, s.mark + 1, s.mark_events, 1);
        goto out_done;
    }
    if (s.closed) {
        /* Cut inside the metadata: every event is there. */
        info->events = s.events;
        info->cut_bytes = (uint64_t)st.st_size - s.array_end;
        rc = finish_file(fd, s.array_end, s.events, 0);
        goto out_done;
    }
    if (s.events && is_flow_start(fd, s.last_start)) {
        s.good = s.prev_good;
        s.events--;
    }
    info->events = s.events;
    info->cut_bytes = (uint64_t)st.st_size - s.good;
    rc = finish_file(fd, s.good, s.events, 1);
out_done:
    if (rc == 0)
        rc = 1;
out:
    return rc;
}

static int repair(const char *path, struct gt__repair_info *info, int marks)
{
    /* O_NONBLOCK: a FIFO put at the path never holds the caller. */
    int fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC), rc;

    if (fd < 0) {
        memset(info, 0, sizeof(*info));
        return -errno;
    }
    rc = gt__trace_repair_fd(fd, info, marks);
    close(fd);
    return rc;
}

int gt__trace_repair(const char *path, struct gt__repair_info *info)
{
    return repair(path, info, 1);
}

int gt__trace_repair_whole(const char *path, struct gt__repair_info *info)
{
    return repair(path, info, 0);
}
