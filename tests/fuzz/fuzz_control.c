/*
 * Fuzz target: control requests and trigger specs (daemon/control.c).
 *
 * Properties: neither parser crashes, reads out of bounds or leaks on any
 * input; every failure leaves a NUL-terminated message; and any trigger
 * that parses formats to a canonical text that parses back to the same
 * trigger and formats to the same text (the daemon sends that text to
 * agents, so it must be stable).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/control/control.h"

static void check_canonical(const struct gt__trigger *t)
{
    char a[2048], b[2048], err[256];
    struct gt__trigger back;

    if (gt__trigger_format(t, a, sizeof(a)) < 0)
        return;
    if (gt__trigger_parse_spec(a, &back, err, sizeof(err)) < 0)
        abort();
    if (gt__trigger_format(&back, b, sizeof(b)) < 0 || strcmp(a, b) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct gt__req req;
    static struct gt__trigger t;
    char err[256];
    char *text;

    if (gt__req_parse((const char *)data, size, &req, err, sizeof(err)) == 0) {
        if (req.cmd == GT__CMD_TRIGGER)
            check_canonical(&req.trig);
    } else if (memchr(err, '\0', sizeof(err)) == NULL) {
        abort();
    }
    text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    if (gt__trigger_parse_spec(text, &t, err, sizeof(err)) == 0)
        check_canonical(&t);
    free(text);
    return 0;
}
