/*
 * Finishing trace files whose writer died (a daemon killed with SIGKILL,
 * a machine that lost power): `gradtraced` at start over its output
 * directory, and `gradtrace convert --repair FILE...`.
 *
 * A file the converter finished ends with its metadata and is left
 * alone. An unfinished one (empty, cut inside traceEvents, or cut inside
 * the metadata tail) is cut back to its last whole event (a flow start
 * whose finish is missing goes too) and closed with a metadata tail that
 * says `"repaired": true` and `"truncated": true`, so every file is valid
 * JSON the validator accepts. What the file held before the cut stays. A
 * file damaged inside is cut at its first byte that is not JSON.
 *
 * Not thread-safe per file; touches only the file named.
 */
#ifndef GRADTRACE_DAEMON_CONVERT_REPAIR_H
#define GRADTRACE_DAEMON_CONVERT_REPAIR_H

#include <stdint.h>

/*
 * The index of unfinished files: a directory in the daemon's output
 * directory (created 0700 by the daemon) holding one hard link, named as
 * the trace, per file a daemon is writing. The writer links a file there
 * when it creates it and unlinks it once the file is finished, so a
 * daemon starting after a kill repairs what the index holds and never
 * opens a finished file, however many there are.
 */
#define GT__UNFINISHED_DIR ".gradtrace-unfinished"

struct gt__repair_info {
    uint64_t events;      /* whole events kept */
    uint64_t cut_bytes;   /* bytes dropped after the last whole event */
};

/*
 * Repairs path in place when it is unfinished.
 * @return 1 when repaired, 0 when it was already whole, -EINVAL when it is
 *         not a gradtrace trace (left alone), -EBUSY when a live writer
 *         holds it (its flock), or another -errno.
 */
int gt__trace_repair(const char *path, struct gt__repair_info *info)
    __attribute__((warn_unused_result));

/*
 * The same, ignoring acknowledgement marks (every whole event stays): for
 * the file a live daemon cut at a full disk, whose chunks it goes on to
 * acknowledge (what did not fit is counted in disk_full_records).
 */
int gt__trace_repair_whole(const char *path, struct gt__repair_info *info)
    __attribute__((warn_unused_result));

/*
 * gt__trace_repair on an open fd (read-write), which stays open: the
 * daemon repairs through the index's link, or through the fd it wrote.
 * marks: 1 to cut back to the last acknowledgement mark (a killed
 * daemon's file), 0 to keep every whole event.
 */
int gt__trace_repair_fd(int fd, struct gt__repair_info *info, int marks)
    __attribute__((warn_unused_result));

#endif
