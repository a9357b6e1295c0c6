#!/usr/bin/env bash
# Instructions to build one request's fields and look up four of them, as
# swift-http-types' HTTPFields and as Larder's HeaderFields. callgrind
# counts a run of 1,000 and one of 11,000 requests; the difference / 10,000
# is the cost per request without start-up.
set -euo pipefail
cd "$(dirname "$0")"
command -v valgrind >/dev/null || { echo "field-types: valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
swift build -c release >/dev/null
count() {
    valgrind --tool=callgrind --callgrind-out-file=/dev/null .build/release/field-types "$1" "$2" 2>&1 \
        | sed -n 's/.*refs: *//p' | tr -d ,
}
for which in larder http-types; do
    small=$(count "$which" 1000)
    large=$(count "$which" 11000)
    echo "$which: $(( (large - small) / 10000 )) instructions per request (6 fields built, 4 looked up)"
done
