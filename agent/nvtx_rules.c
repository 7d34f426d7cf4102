/*
 * NVTX's text rules (agent/nvtx.h): wide names as UTF-8, PyTorch's
 * "seq = N", and which range is a layer with which path. Pure functions
 * of their arguments (no state, no allocation), so the tests drive them
 * directly; agent/nvtx_ranges.c applies them per thread.
 */
#include <fnmatch.h>
#include <string.h>

#include "agent/nvtx.h"

/* ------------------------------------------------------------ UTF-8 */

size_t gt__nvtx_utf8(const wchar_t *w, char *out, size_t cap)
{
    size_t n = 0;
    for (; w && *w; w++) {
        uint32_t c = (uint32_t)*w;
        char b[4];
        size_t k;
        if (c < 0x80) {
            b[0] = (char)c;
            k = 1;
        } else if (c < 0x800) {
            b[0] = (char)(0xc0 | (c >> 6));
            b[1] = (char)(0x80 | (c & 0x3f));
            k = 2;
        } else if (c < 0x10000) {
            if (c >= 0xd800 && c <= 0xdfff)
                c = 0xfffd;
            b[0] = (char)(0xe0 | (c >> 12));
            b[1] = (char)(0x80 | ((c >> 6) & 0x3f));
            b[2] = (char)(0x80 | (c & 0x3f));
            k = 3;
        } else if (c < 0x110000) {
            b[0] = (char)(0xf0 | (c >> 18));
            b[1] = (char)(0x80 | ((c >> 12) & 0x3f));
            b[2] = (char)(0x80 | ((c >> 6) & 0x3f));
            b[3] = (char)(0x80 | (c & 0x3f));
            k = 4;
        } else {
            continue;
        }
        if (n + k > cap)
            break;
        memcpy(out + n, b, k);
        n += k;
    }
    return n;
}

/* ------------------------------------------------------------ seq = N */

int gt__nvtx_parse_seq(const char *s, uint64_t *seq)
{
    if (!s)
        return 0;
    const char *p = s;
    while ((p = strstr(p, "seq = ")) != NULL) {
        /* A whole word: start of the string or after a space or comma. */
        if (p == s || p[-1] == ' ' || p[-1] == ',') {
            const char *d = p + 6;
            if (*d >= '0' && *d <= '9') {
                uint64_t v = 0;
                for (; *d >= '0' && *d <= '9'; d++) {
                    if (v > (UINT64_MAX - 9) / 10)
                        return 0;
                    v = v * 10 + (uint64_t)(*d - '0');
                }
                *seq = v;
                return 1;
            }
        }
        p += 6;
    }
    return 0;
}

/* ------------------------------------------------------------ layers */

static int phase_word(const char *text)
{
    static const char *const words[] = {"forward", "backward", "optimizer"};

    for (int i = 0; i < 3; i++)
        if (!strcmp(text, words[i]))
            return GT__NVTX_PHASE_FORWARD + i;
    return 0;
}

int gt__nvtx_layer_path(const char *glob, const char *text, int phase,
                        const char *parent, size_t plen, char *out,
                        size_t cap, size_t *len)
{
    static const char bwd[] = " backward";
    const size_t bl = sizeof(bwd) - 1;
    int kind = phase == GT__NVTX_PHASE_BACKWARD ? GT__NVTX_BWD : GT__NVTX_FWD;
    size_t n, k = 0;
    uint64_t seq;
    int word;

    *len = 0;
    /* PyTorch's own ranges: ops with a sequence number ("aten::mm, seq =
     * 12"), and ops and nodes without one ("aten::empty",
     * "torch::autograd::AccumulateGrad"): a module path has no "::". */
    if (!text || !*text || gt__nvtx_parse_seq(text, &seq) || strstr(text, "::"))
        return GT__NVTX_NONE;
    word = phase_word(text);
    if (word)
        return word;
    if (phase == GT__NVTX_PHASE_OPTIMIZER)
        return GT__NVTX_NONE;
    n = strlen(text);
    if (n > bl && !memcmp(text + n - bl, bwd, bl)) {
        n -= bl;
        kind = GT__NVTX_BWD;
    }
    /* Join unless the name is already a full path below the open one. */
    if (plen && !(n > plen && text[plen] == '.' && !memcmp(text, parent, plen))) {
        if (plen + 1 >= cap)
            return GT__NVTX_NONE;
        memcpy(out, parent, plen);
        out[plen] = '.';
        k = plen + 1;
    }
    if (k + n >= cap)
        return GT__NVTX_NONE;
    memcpy(out + k, text, n);
    k += n;
    out[k] = '\0';
    if (glob && *glob && fnmatch(glob, out, 0) != 0)
        return GT__NVTX_NONE;
    *len = k;
    return kind;
}
