// libbrotli (libbrotli-dev): brotli bodies (RFC 7932) decoded for clients
// that do not take br, and `compress_codec = "br"`.
#include <brotli/decode.h>
#include <brotli/encode.h>
