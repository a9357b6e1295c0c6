// hiredis (libhiredis-dev): the synchronous reply types and the
// asynchronous API that Larder drives from its own event loop.
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
