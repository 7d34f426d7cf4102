/*
 * gradtraced's sockets: the private runtime directory, the daemon lock, the
 * agent and control listeners, peer credentials and orderly shutdown.
 *
 * Trust model: the daemon serves exactly one user. Three layers keep
 * everyone else out, each enough on its own:
 *   1. each socket's directory must be a real directory (not a symlink)
 *      owned by us with no group/other permissions; the default one is
 *      created 0700;
 *   2. sockets are created with umask 0177 so they are 0600 from birth
 *      (no chmod window);
 *   3. every accepted connection's SO_PEERCRED uid must equal ours, so a
 *      socket reached through a descriptor passed by someone else, or a
 *      directory whose permissions were later loosened, still refuses
 *      (peer.c, for the agent and the control connections alike).
 * Only filesystem sockets are used (never the abstract namespace, which
 * has no permissions) and never TCP.
 *
 * One daemon per socket: an flock on "<agent socket>.lock", held for the
 * daemon's life, serialises starts. Under the lock a socket file that
 * still accepts connections belongs to a live daemon (refuse to start);
 * one that refuses them (ECONNREFUSED) is stale and is unlinked.
 */
#include "daemon/server/server.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/paths.h"
#include "common/util.h"
#include "daemon/convert/convert.h"
#include "daemon/convert/repair.h"

/*
 * The directory that holds path: created 0700 when it is the default
 * runtime directory and missing; otherwise it must exist. Either way it
 * must be ours and closed to others.
 */
static int check_socket_dir(const char *path)
{
    char buf[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char def[4096];
    const char *dir;
    struct stat st;

    snprintf(buf, sizeof(buf), "%s", path);
    dir = dirname(buf);
    if (gt__runtime_dir(def, sizeof(def)) == 0 && strcmp(def, dir) == 0 &&
        mkdir(dir, 0700) == 0)
        gt__log("created runtime directory %s", dir);
    if (lstat(dir, &st) != 0) {
        gt__log("socket directory %s: %s", dir, strerror(errno));
        return -errno;
    }
    if (!S_ISDIR(st.st_mode)) {
        gt__log("socket directory %s is not a directory (or is a symlink)", dir);
        return -ENOTDIR;
    }
    if (st.st_uid != geteuid()) {
        gt__log("refusing socket directory %s: owned by uid %u, not %u", dir,
                (unsigned)st.st_uid, (unsigned)geteuid());
        return -EPERM;
    }
    if (st.st_mode & 077) {
        gt__log("refusing socket directory %s: mode %03o is open to others "
                "(must be 0700)", dir, (unsigned)(st.st_mode & 0777));
        return -EPERM;
    }
    return 0;
}

/* -EADDRINUSE when a daemon answers on path, 0 when free (stale removed). */
static int clear_stale_socket(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct stat st;
    int fd, rc = 0;

    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISSOCK(st.st_mode)) {
        gt__log("%s exists and is not a socket; not touching it", path);
        return -EEXIST;
    }
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
        gt__log("another daemon is listening on %s", path);
        rc = -EADDRINUSE;
    } else if (errno == ECONNREFUSED) {
        gt__log("removing stale socket %s", path);
        if (unlink(path) != 0 && errno != ENOENT)
            rc = -errno;
    } else {
        rc = -errno;
        gt__log("cannot probe %s: %s", path, strerror(errno));
    }
    close(fd);
    return rc;
}

static int listen_on(struct gt__server *s, uv_pipe_t *p, const char *path,
                     uv_connection_cb cb)
{
    mode_t old;
    int rc;

    if ((rc = uv_pipe_init(s->loop, p, 0)) != 0)
        return rc;
    p->data = s;
    /* Born 0600: no moment where another user could connect. */
    old = umask(0177);
    rc = uv_pipe_bind(p, path);
    umask(old);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)p, 128, cb);
    if (rc != 0) {
        gt__log("cannot listen on %s: %s", path, uv_strerror(rc));
        uv_close((uv_handle_t *)p, NULL);
    }
    return rc;
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct gt__server *s = h->data;

    gt__log("signal %d: shutting down", signum);
    gt__server_shutdown(s);
}

/* Connections that never complete a hello would hold a slot forever (a
 * real agent sends it at once): close them after GT__HELLO_TIMEOUT_S. */
static void on_sweep(uv_timer_t *t)
{
    struct gt__server *s = t->data;
    uint64_t now = gt__mono_ns();
    struct gt__agent *a, *next;

    for (a = s->agents; a; a = next) {
        next = a->next;
        if (!a->hello_seen && now - a->connected_ns > GT__HELLO_TIMEOUT_S * 1000000000ull)
            gt__agent_close(a, "closing: no hello within the time limit");
        else
            gt__agent_sweep(a);
    }
    gt__disk_parked_sweep(s);
    gt__armed_retire(s);
    gt__ctl_sweep(s);
}

/* A worker has news (any thread): the loop looks at its agents. */
static void wake_loop(void *ud)
{
    struct gt__server *s = ud;

    uv_async_send(&s->wake);
}

static void on_wake(uv_async_t *h)
{
    gt__agent_wake(h->data);
}

/* The conversion pool and the handle its workers wake the loop with. */
static int start_pool(struct gt__server *s, const struct gt__daemon_opts *o)
{
    unsigned n = o->workers ? (unsigned)o->workers
                            : gt__workq_threads_for(sysconf(_SC_NPROCESSORS_ONLN));
    size_t high = o->queue_kb ? (size_t)o->queue_kb << 10 : GT__AGENT_QUEUE_BYTES;
    int rc = uv_async_init(s->loop, &s->wake, on_wake);

    if (rc != 0)
        return rc;
    s->wake.data = s;
    s->wq = gt__workq_create(n, high, gt__agent_convert, wake_loop, s);
    if (!s->wq) {
        uv_close((uv_handle_t *)&s->wake, NULL);
        gt__log("cannot start the conversion pool");
        return -ENOMEM;
    }
    gt__log("conversion pool: %u thread%s, %zu KB queued per agent at most",
            n, n == 1 ? "" : "s", high >> 10);
    return 0;
}

static int take_lock(struct gt__server *s)
{
    char lock[sizeof(s->agent_path) + 8];

    snprintf(lock, sizeof(lock), "%s.lock", s->agent_path);
    s->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (s->lock_fd < 0) {
        gt__log("cannot open lock %s: %s", lock, strerror(errno));
        return -errno;
    }
    if (flock(s->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        gt__log("another daemon holds %s", lock);
        close(s->lock_fd);
        s->lock_fd = -1;
        return -EADDRINUSE;
    }
    return 0;
}

/* mkdir -p: the output directory may be several levels deep. Created
 * 0700: traces hold command lines (share them with chmod afterwards). */
static int mkdirs(const char *dir)
{
    char buf[4096];
    size_t n = strlen(dir);

    if (n == 0 || n >= sizeof(buf))
        return -ENAMETOOLONG;
    memcpy(buf, dir, n + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, 0700) != 0 && errno != EEXIST)
        return -errno;
    return 0;
}

/*
 * Whoever else may write in the output directory could plant a symlink
 * or a file where a trace will go. Files are created O_EXCL|O_NOFOLLOW
 * anyway; on top, the directory must be ours (or root's, like /), and
 * writable by nobody else unless it is sticky and ours (a private /tmp).
 */
static int check_out_dir(const char *dir)
{
    struct stat st;

    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        gt__log("output directory %s is not a directory", dir);
        return -ENOTDIR;
    }
    if (st.st_uid != geteuid() && st.st_uid != 0) {
        gt__log("refusing output directory %s: owned by uid %u, not %u", dir,
                (unsigned)st.st_uid, (unsigned)geteuid());
        return -EPERM;
    }
    if ((st.st_mode & 022) && !((st.st_mode & S_ISVTX) && st.st_uid == geteuid())) {
        gt__log("refusing output directory %s: mode %04o is writable by others "
                "(allowed only when sticky and owned by uid %u)", dir,
                (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
        return -EPERM;
    }
    return 0;
}

static int make_out_dir(struct gt__server *s, const char *dir)
{
    char *abs;
    int rc = mkdirs(dir);

    if (rc < 0) {
        gt__log("cannot create output directory %s: %s", dir, strerror(-rc));
        return rc;
    }
    abs = realpath(dir, NULL);
    if (!abs || strlen(abs) >= sizeof(s->out_dir)) {
        gt__log("cannot resolve output directory %s", dir);
        free(abs);
        return -ENAMETOOLONG;
    }
    snprintf(s->out_dir, sizeof(s->out_dir), "%s", abs);
    free(abs);
    return check_out_dir(s->out_dir);
}

/*
 * The unfinished-file index (repair.h) in the output directory: created
 * 0700, and used only when it is ours, a real directory, closed to others
 * (the output directory may be a shared sticky one).
 */
static int make_index_dir(const struct gt__server *s, char *dir, size_t cap)
{
    struct stat st;

    snprintf(dir, cap, "%s/" GT__UNFINISHED_DIR, s->out_dir);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        gt__log("cannot create %s: %s; files left unfinished by a kill are "
                "repaired only by gradtrace convert --repair", dir, strerror(errno));
        return -errno;
    }
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != geteuid() || (st.st_mode & 077)) {
        gt__log("refusing %s: not a directory of ours closed to others", dir);
        return -EPERM;
    }
    return 0;
}

/*
 * One entry of the index, a link to a file a daemon was writing: repaired
 * through the link (the same inode, whatever was put at its name since),
 * then the entry goes, unless a live writer holds the file.
 */
static void repair_entry(struct gt__server *s, int dfd, const char *name)
{
    struct gt__repair_info info;
    struct stat st;
    int rc = -EINVAL;
    int fd = openat(dfd, name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
        st.st_uid == geteuid())
        /* One link left: the trace itself was deleted; nothing to do. */
        rc = st.st_nlink > 1 ? gt__trace_repair_fd(fd, &info, 1) : 0;
    if (fd >= 0)
        close(fd);
    if (rc == -EBUSY)
        return;
    if (rc > 0) {
        s->repaired++;
        gt__log("repaired %s/%s: left unfinished; %llu events kept, %llu bytes "
                "cut, marked truncated", s->out_dir, name,
                (unsigned long long)info.events, (unsigned long long)info.cut_bytes);
    } else if (rc < 0 && rc != -EINVAL) {
        gt__log("cannot repair %s/%s: %s", s->out_dir, name, strerror(-rc));
        return; /* kept for the next start */
    }
    (void)unlinkat(dfd, name, 0);
}

/*
 * Traces a killed daemon left unfinished are finished now, valid and
 * marked truncated (repair.h). Only the index is read: finished traces,
 * and anything else in the output directory, are never opened.
 */
static void repair_out_dir(struct gt__server *s)
{
    char dir[sizeof(s->index_dir)];
    struct dirent *e;
    DIR *d;

    s->index_dir[0] = '\0';
    if (make_index_dir(s, dir, sizeof(dir)) != 0)
        return;
    snprintf(s->index_dir, sizeof(s->index_dir), "%s", dir);
    if (!(d = opendir(dir)))
        return;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            repair_entry(s, dirfd(d), e->d_name);
    closedir(d);
}

int gt__server_init(struct gt__server *s, uv_loop_t *loop,
                    const struct gt__daemon_opts *o)
{
    int rc;

    memset(s, 0, sizeof(*s));
    s->loop = loop;
    s->shutdown = gt__server_shutdown;
    s->lock_fd = -1;
    s->raw = o->raw;
    s->max_file_bytes = o->max_file_bytes;
    s->ctl_idle_ns = (o->ctl_idle_s ? o->ctl_idle_s : GT__CTL_IDLE_S) * 1000000000ull;
    s->start_ns = gt__mono_ns();
    if (gt__agent_socket_path(s->agent_path, sizeof(s->agent_path)) < 0 ||
        gt__control_socket_path(s->control_path, sizeof(s->control_path)) < 0) {
        gt__log("socket path too long (limit %zu bytes)", sizeof(s->agent_path) - 1);
        return -ENAMETOOLONG;
    }
    if ((rc = check_socket_dir(s->agent_path)) < 0 ||
        (rc = check_socket_dir(s->control_path)) < 0)
        return rc;
    if ((rc = make_out_dir(s, o->out_dir)) < 0)
        return rc;
    if ((rc = take_lock(s)) < 0)
        return rc;
    repair_out_dir(s);
    if ((rc = start_pool(s, o)) < 0)
        goto out_unlock;
    if ((rc = clear_stale_socket(s->agent_path)) < 0 ||
        (rc = clear_stale_socket(s->control_path)) < 0)
        goto out_stop_pool;
    if ((rc = listen_on(s, &s->agent_srv, s->agent_path,
                        gt__agent_on_connection)) != 0)
        goto out_stop_pool;
    if ((rc = listen_on(s, &s->ctl_srv, s->control_path,
                        gt__ctl_on_connection)) != 0)
        goto out_close_agent_srv;
    s->listening = 1;
    uv_signal_init(loop, &s->sig_int);
    uv_signal_init(loop, &s->sig_term);
    s->sig_int.data = s->sig_term.data = s;
    uv_timer_init(loop, &s->sweep);
    s->sweep.data = s;
    uv_timer_start(&s->sweep, on_sweep, 1000, 1000);
    uv_signal_start(&s->sig_int, on_signal, SIGINT);
    uv_signal_start(&s->sig_term, on_signal, SIGTERM);
    gt__log("version %s pid %d: agents on %s, control on %s, output to %s%s",
            GT__VERSION, (int)getpid(), s->agent_path, s->control_path,
            s->out_dir, s->raw ? " (raw .gtr kept)" : "");
    return 0;

out_close_agent_srv:
    uv_close((uv_handle_t *)&s->agent_srv, NULL);
    unlink(s->agent_path);
out_stop_pool:
    uv_close((uv_handle_t *)&s->wake, NULL);
    gt__workq_free(s->wq);
    s->wq = NULL;
out_unlock:
    close(s->lock_fd);
    s->lock_fd = -1;
    return rc < 0 ? rc : -EIO;
}

void gt__server_shutdown(struct gt__server *s)
{
    if (s->shutting_down)
        return;
    s->shutting_down = 1;
    gt__agent_accept_pending(s);
    if (s->listening) {
        /* Unlink first so no new client finds a socket nobody accepts on. */
        unlink(s->agent_path);
        unlink(s->control_path);
        uv_close((uv_handle_t *)&s->agent_srv, NULL);
        uv_close((uv_handle_t *)&s->ctl_srv, NULL);
        s->listening = 0;
    }
    /* Whatever agents already sent is still in their sockets: read it
     * before finishing, so a process that exited just before the
     * shutdown is complete in its trace. */
    while (s->agents) {
        struct gt__agent *a = s->agents;

        if (!gt__agent_drain(a))
            gt__agent_close(a, "daemon shutting down");
    }
    gt__disk_parked_close_all(s);
    uv_close((uv_handle_t *)&s->sweep, NULL);
    uv_close((uv_handle_t *)&s->wake, NULL);
    uv_close((uv_handle_t *)&s->sig_int, NULL);
    uv_close((uv_handle_t *)&s->sig_term, NULL);
    gt__ctl_close_all(s);
}

void gt__server_cleanup(struct gt__server *s)
{
    struct gt__done *d = s->done;

    while (d) {
        struct gt__done *next = d->next;

        gt__done_free(d);
        d = next;
    }
    s->done = NULL;
    /* Every agent was closed (and waited for) by the shutdown. */
    gt__workq_free(s->wq);
    s->wq = NULL;
    if (s->lock_fd >= 0)
        close(s->lock_fd);
    s->lock_fd = -1;
    gt__log("stopped: %llu connections, %llu records, %llu files",
            (unsigned long long)s->connections,
            (unsigned long long)gt__stat(&s->records), (unsigned long long)s->files);
}
