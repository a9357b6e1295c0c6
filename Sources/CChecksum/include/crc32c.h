#ifndef LARDER_CRC32C_H
#define LARDER_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/// CRC-32C (Castagnoli) of `length` bytes, continuing from `crc` (0 to
/// start; pass the previous result to add more bytes). Uses the CPU's
/// crc32 instruction where it has one (SSE 4.2), a table otherwise.
uint32_t larder_crc32c(uint32_t crc, const void *data, size_t length);

/// The same by table alone (what a CPU without the instruction runs), for tests.
uint32_t larder_crc32c_table(uint32_t crc, const void *data, size_t length);

/// 1 when the hardware instruction is used, for tests and logs.
int larder_crc32c_hardware(void);

#endif
