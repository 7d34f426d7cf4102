/*
 * Output file names from untrusted agent text (names.c). Pure functions:
 * the converter names window files with them, the server names each
 * agent's outputs.
 */
#ifndef GRADTRACE_DAEMON_CONVERT_NAMES_H
#define GRADTRACE_DAEMON_CONVERT_NAMES_H

#include <stddef.h>
#include <stdint.h>

/* Longest sanitized file-name part. */
#define GT__NAME_PART_MAX 64

/*
 * Copies len bytes of untrusted text into out as a file-name part: only
 * [A-Za-z0-9._-] survive (others become '_'), no leading '.', no "..",
 * at most min(cap - 1, GT__NAME_PART_MAX) bytes, never empty ("unknown").
 * Embedded NULs are ordinary bytes here. cap must be >= 8.
 * @return the length written (out is NUL-terminated).
 */
size_t gt__sanitize_part(const char *in, size_t len, char *out, size_t cap);

/*
 * A short program name from a hello command line (arguments joined by
 * spaces): the basename of argv[0]; for python interpreters the script or
 * -m module name past the interpreter's flags (-u, -X opt, ...), or
 * "<interpreter>-c" for -c; for torchrun or -m torch.distributed.run the
 * training script it launches.
 * @return the sanitized length written into out.
 */
size_t gt__command_name(const char *cmdline, char *out, size_t cap);

/* 1 when the command line runs code given on it (python -c CODE), which
 * names no program: gt__command_name gives "<interpreter>-c". */
int gt__command_is_code(const char *cmdline);

/*
 * The file stem of one agent's outputs: "<command>-rank<R>-pid<P>" or
 * "<command>-pid<P>", sanitized. @return length, or -ENAMETOOLONG.
 */
int gt__agent_stem(const char *cmdline, int32_t rank, uint32_t pid, char *out,
                   size_t cap);

/*
 * Trace files end with Kineto's suffix, so tools that pick traces by name
 * (the TensorBoard profiler plugin takes only *.pt.trace.json) find them.
 */
#define GT__TRACE_EXT ".pt.trace.json"

/*
 * The length of path's trace suffix: 14 for ".pt.trace.json", 5 for any
 * other ".json", 0 otherwise. Rotated and window names go before it.
 */
size_t gt__trace_ext_len(const char *path);

/*
 * *p with its leading `from` (a path prefix ending in an old stem)
 * replaced by `to`, when *p starts with it and the stem ends there (a '.'
 * or '-' follows): the paths of a stream renamed with gt__conv_restem.
 * *p is an allocator string, replaced. @return 1 replaced, 0 not this
 * stem's, -ENOMEM.
 */
int gt__path_restem(char **p, const char *from, const char *to);

#endif /* GRADTRACE_DAEMON_CONVERT_NAMES_H */
