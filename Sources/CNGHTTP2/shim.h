// libnghttp2 (Debian's libnghttp2-dev): HTTP/2 framing, HPACK and flow
// control for HTTP/2 to clients, driven from a worker's loop.
#include <nghttp2/nghttp2.h>
