/*
 * The checks the agent and the CLI make before they send a byte to a
 * daemon socket or obey one: the socket's directory is a real directory
 * of this user closed to others, and the peer runs as this user.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/paths.h"

static char dir[64];

static void mkdir_tmp(void)
{
    snprintf(dir, sizeof(dir), "/tmp/gt-paths.XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static int check_sock_in(const char *d)
{
    char path[256], why[256];

    snprintf(path, sizeof(path), "%s/agent.sock", d);
    return gt__socket_dir_check(path, why, sizeof(why));
}

Test(paths, private_directory_accepted)
{
    mkdir_tmp();
    cr_assert_eq(chmod(dir, 0700), 0);
    cr_assert_eq(check_sock_in(dir), 0);
    rmdir(dir);
}

Test(paths, directory_open_to_others_refused)
{
    char path[256], why[256];

    mkdir_tmp();
    cr_assert_eq(chmod(dir, 0755), 0);
    snprintf(path, sizeof(path), "%s/agent.sock", dir);
    cr_assert_eq(gt__socket_dir_check(path, why, sizeof(why)), -EPERM);
    cr_assert_not_null(strstr(why, "open to others"), "%s", why);
    cr_assert_eq(chmod(dir, 0701), 0);
    cr_assert_eq(check_sock_in(dir), -EPERM);
    rmdir(dir);
}

Test(paths, symlinked_directory_refused)
{
    char link[96];

    mkdir_tmp();
    cr_assert_eq(chmod(dir, 0700), 0);
    snprintf(link, sizeof(link), "%s.link", dir);
    cr_assert_eq(symlink(dir, link), 0);
    cr_assert_eq(check_sock_in(link), -ENOTDIR);
    unlink(link);
    rmdir(dir);
}

Test(paths, missing_directory_refused)
{
    cr_assert_eq(check_sock_in("/nonexistent-gradtrace-dir"), -ENOENT);
}

Test(paths, relative_socket_path_checks_its_directory)
{
    char why[256];

    /* "agent.sock" lives in ".", which is whatever the process runs in:
     * checked like any other directory (the test's cwd is not 0700). */
    struct stat st;
    cr_assert_eq(stat(".", &st), 0);
    int rc = gt__socket_dir_check("agent.sock", why, sizeof(why));
    if (st.st_uid == geteuid() && !(st.st_mode & 077))
        cr_assert_eq(rc, 0);
    else
        cr_assert_lt(rc, 0);
}

Test(paths, own_peer_accepted)
{
    int sv[2];
    char why[256];

    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    cr_assert_eq(gt__peer_uid_check(sv[0], why, sizeof(why)), 0, "%s", why);
    close(sv[0]);
    close(sv[1]);
}

Test(paths, not_a_socket_refused)
{
    char why[256];
    int fd[2];

    cr_assert_eq(pipe(fd), 0);
    cr_assert_lt(gt__peer_uid_check(fd[0], why, sizeof(why)), 0);
    cr_assert_not_null(strstr(why, "credentials"), "%s", why);
    close(fd[0]);
    close(fd[1]);
}
