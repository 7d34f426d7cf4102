/*
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as used by iSCSI,
 * ext4 and SCTP: good error detection on short and long inputs.
 *
 * Two implementations: the SSE4.2 crc32 instruction (8 bytes per step) when
 * the CPU has it, else portable slice-by-8 tables built once. The choice is
 * made on first use; both give identical results (tests/unit/test_codec.c
 * checks the standard check value 0xE3069283 for "123456789").
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "common/codec.h"

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_build(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
}

static uint32_t crc_soft(uint32_t crc, const uint8_t *p, size_t len)
{
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        v ^= crc;
        crc = table[7][v & 0xff] ^ table[6][(v >> 8) & 0xff] ^
              table[5][(v >> 16) & 0xff] ^ table[4][(v >> 24) & 0xff] ^
              table[3][(v >> 32) & 0xff] ^ table[2][(v >> 40) & 0xff] ^
              table[1][(v >> 48) & 0xff] ^ table[0][v >> 56];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
    return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc,
                                                        const uint8_t *p,
                                                        size_t len)
{
    uint64_t c = crc;
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        len -= 8;
    }
    crc = (uint32_t)c;
    while (len--)
        crc = __builtin_ia32_crc32qi(crc, *p++);
    return crc;
}
#endif

static int use_hw = -1;

static void choose(void)
{
    table_build();
#if defined(__x86_64__)
    __builtin_cpu_init();
    use_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#else
    use_hw = 0;
#endif
}

uint32_t gt__crc32c(uint32_t crc, const void *buf, size_t len)
{
    pthread_once(&table_once, choose);
    crc = ~crc;
#if defined(__x86_64__)
    if (use_hw)
        return ~crc_hw(crc, buf, len);
#endif
    return ~crc_soft(crc, buf, len);
}

/* For tests: the portable path regardless of the CPU. */
uint32_t gt__crc32c_soft(uint32_t crc, const void *buf, size_t len)
{
    pthread_once(&table_once, choose);
    return ~crc_soft(~crc, buf, len);
}
