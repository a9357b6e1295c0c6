// CRC-32C for disk and shared-tier records: the SSE 4.2 instruction when
// the CPU has it (eight bytes a step), else slicing-by-8 over tables.
#include "crc32c.h"

#include <pthread.h>
#include <string.h>

static uint32_t table[8][256];
static int hardware;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void setup(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++) table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xFF];
#if defined(__x86_64__)
    __builtin_cpu_init();
    hardware = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t software(uint32_t c, const uint8_t *p, size_t n) {
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);  // little-endian hosts only (x86_64, aarch64)
        w ^= c;
        c = table[7][w & 0xFF] ^ table[6][(w >> 8) & 0xFF] ^ table[5][(w >> 16) & 0xFF] ^ table[4][(w >> 24) & 0xFF]
            ^ table[3][(w >> 32) & 0xFF] ^ table[2][(w >> 40) & 0xFF] ^ table[1][(w >> 48) & 0xFF] ^ table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ table[0][(c ^ *p++) & 0xFF];
    return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t instruction(uint32_t c32, const uint8_t *p, size_t n) {
    uint64_t c = c32;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        n -= 8;
    }
    uint32_t c8 = (uint32_t)c;
    while (n--) c8 = __builtin_ia32_crc32qi(c8, *p++);
    return c8;
}
#endif

uint32_t larder_crc32c(uint32_t crc, const void *data, size_t length) {
    pthread_once(&once, setup);
    const uint8_t *p = data;
    uint32_t c = ~crc;
#if defined(__x86_64__)
    if (hardware) return ~instruction(c, p, length);
#endif
    return ~software(c, p, length);
}

uint32_t larder_crc32c_table(uint32_t crc, const void *data, size_t length) {
    pthread_once(&once, setup);
    return ~software(~crc, data, length);
}

int larder_crc32c_hardware(void) {
    pthread_once(&once, setup);
    return hardware;
}
