/*
 * Why a recording (.gtr) could not be read, said the same way by every
 * command that reads one (convert, report, diff): one clause, for the
 * caller's "gradtrace CMD: PATH: <why>" line. A JSON trace given where a
 * recording was expected is the common mistake, and is named as such.
 */
#include "daemon/cli/cli.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "common/util.h"
#include "daemon/convert/jsonchk.h"
#include "daemon/convert/consumer.h"

/* Whether the file's head (after a UTF-8 byte-order mark) could begin a
 * JSON object or array: every byte of it accepted by the converter's JSON
 * checker, so that random bytes that happen to start with '[' are not
 * taken for a trace. */
static int looks_like_json(const char *path)
{
    unsigned char b[512];
    struct gt__jchk j;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    ssize_t n;
    size_t i = 0, k;

    if (fd < 0)
        return 0;
    n = read(fd, b, sizeof(b));
    close(fd);
    if (n <= 0)
        return 0;
    if (n >= 3 && b[0] == 0xef && b[1] == 0xbb && b[2] == 0xbf)
        i = 3;
    for (k = i; k < (size_t)n && (b[k] == ' ' || b[k] == '\t' || b[k] == '\n' ||
                                  b[k] == '\r'); k++)
        ;
    if (k == (size_t)n || (b[k] != '{' && b[k] != '['))
        return 0;
    gt__jchk_init(&j);
    for (; i < (size_t)n; i++)
        if (gt__jchk_byte(&j, b[i]) < 0)
            return 0;
    return 1;
}

const char *gt__cli_gtr_why(const char *path, int rc,
                            const struct gt__convert_info *info, char *buf,
                            size_t cap)
{
    int no_header = info->stage == GT__CONVERT_NO_HELLO ||
                    (info->stage == GT__CONVERT_STREAM && rc == GT__EMAGIC);

    if (info->stage == GT__CONVERT_NO_HELLO && info->read == 0)
        return "empty file";
    if (no_header && looks_like_json(path))
        return "already a JSON trace, not a recording: open it in a viewer; "
               "report, diff and merge read it as it is";
    if (no_header)
        return "not a gradtrace recording (no gradtrace header; recordings "
               "are what record --raw and GRADTRACE_FILE write)";
    if (info->stage == GT__CONVERT_STREAM)
        snprintf(buf, cap, "damaged recording (%s)", gt__strerror(rc));
    else if (info->stage == GT__CONVERT_DONE)
        snprintf(buf, cap, "a gradtrace header, but no readable chunk");
    else
        snprintf(buf, cap, "%s", gt__strerror(rc));
    return buf;
}
