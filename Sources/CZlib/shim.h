// zlib (zlib1g-dev): gzip decoding of stored responses for clients that
// do not accept gzip. The macros that call inflateInit2_ with the library's
// version and struct size are not visible to Swift, so one inline function
// stands in for each.
#include <zlib.h>

static inline int larder_inflate_init_gzip(z_streamp stream) {
    return inflateInit2(stream, 16 + MAX_WBITS);  // gzip wrapper only
}

static inline int larder_deflate_init_gzip(z_streamp stream, int level) {
    return deflateInit2(stream, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
}
