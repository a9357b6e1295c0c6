// libzstd (libzstd-dev): zstd bodies decoded for clients that do not take
// zstd, and `compress_codec = "zstd"`. The content-size sentinels are
// macros Swift cannot import: an inline function reads them.
#include <zstd.h>

// The decoded size a frame's header declares; -1 unknown, -2 not a frame.
static inline long long larder_zstd_content_size(const void *src, size_t size) {
    unsigned long long n = ZSTD_getFrameContentSize(src, size);
    if (n == ZSTD_CONTENTSIZE_UNKNOWN) return -1;
    if (n == ZSTD_CONTENTSIZE_ERROR || n > (unsigned long long)0x7fffffffffffffffLL) return -2;
    return (long long)n;
}
