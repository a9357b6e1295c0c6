#!/bin/sh
# The whole test suite (unit and end-to-end: the larder binary the tests
# start is built with the same sanitizer) under AddressSanitizer and then
# ThreadSanitizer, each in its own build folder. Any report fails the run.
#
#   fuzz/sanitizers.sh [address] [thread]
set -eu
cd "$(dirname "$0")/.."
status=0
for sanitizer in ${*:-address thread}; do
    echo "== $sanitizer sanitizer" >&2
    # Process-lifetime objects are still reachable at exit: not leaks.
    export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1" TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
    # Tests that measure memory skip (ASan's shadow memory inflates RSS).
    export LARDER_TEST_SANITIZER=1
    log=".build-$sanitizer/test.log"
    mkdir -p ".build-$sanitizer"
    if ! swift test --sanitize="$sanitizer" --scratch-path ".build-$sanitizer" > "$log" 2>&1; then
        echo "== $sanitizer: FAILED (see $log)" >&2
        grep -E "ERROR: AddressSanitizer|WARNING: ThreadSanitizer|error:|failed \\(" "$log" | head -20 >&2
        status=1
    else
        grep -E "Executed [0-9]+ tests" "$log" | tail -1 >&2
    fi
done
exit $status
