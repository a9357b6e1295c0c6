#!/bin/sh
# Runs each libFuzzer target for a bounded time (Swift's -sanitize=fuzzer,
# with AddressSanitizer), starting from the corpus kept in fuzz/corpus.
#
#   fuzz/run.sh [seconds_per_target] [target ...]
#
# Targets: request_parser, chunked_decoder, cache_headers, multipart,
# disk_record, config_values (the config loader's value parsers; whole config files, TOML
# syntax included, are replayed by the test suite through
# `larder check-config` from fuzz/corpus/config).
# A crash is saved as fuzz/crashes/TARGET-crash-*; add it to
# fuzz/corpus/TARGET so the normal test run replays it from then on.
# MERGE=1 adds the new interesting inputs found to fuzz/corpus (minimized).
set -eu
cd "$(dirname "$0")/.."
SECONDS_PER=${1:-60}
[ $# -gt 0 ] && shift
TARGETS=${*:-request_parser chunked_decoder cache_headers multipart disk_record config_values}
OUT=.build-fuzz
FLAGS="-O -g -sanitize=fuzzer,address -parse-as-library"
mkdir -p "$OUT" fuzz/crashes

# A module compiled once for the targets that import it.
module() {
    # shellcheck disable=SC2086
    swiftc $FLAGS -wmo -module-name "$1" -emit-module -emit-module-path "$OUT/$1.swiftmodule" -I "$OUT" \
        -I "$OUT/CEventLoop" -I "$OUT/CChecksum" \
        -c Sources/"$1"/*.swift -o "$OUT/$1.o"
}

# A C target (Sources/NAME/FILE.c, its header in include/) as a module swiftc finds.
cmodule() {
    mkdir -p "$OUT/$1"
    printf 'module %s {\n  header "%s"\n  export *\n}\n' "$1" "$PWD/Sources/$1/include/$2.h" > "$OUT/$1/module.modulemap"
    clang -O2 -g -fsanitize=fuzzer-no-link,address -I "Sources/$1/include" -c "Sources/$1/$2.c" -o "$OUT/$2.o"
}

build() {
    case $1 in
        request_parser|chunked_decoder)
            module HTTPHeaders
            # shellcheck disable=SC2086
            swiftc $FLAGS -module-name HTTP1 -I "$OUT" Sources/HTTP1/*.swift "fuzz/targets/$1.swift" \
                "$OUT/HTTPHeaders.o" -o "$OUT/$1" ;;
        cache_headers|multipart)
            module HTTPHeaders
            # shellcheck disable=SC2086
            swiftc $FLAGS -module-name CacheSemantics -I "$OUT" Sources/CacheSemantics/*.swift "fuzz/targets/$1.swift" \
                "$OUT/HTTPHeaders.o" -o "$OUT/$1" ;;
        config_values)
            # shellcheck disable=SC2086
            swiftc $FLAGS -module-name larder_units Sources/larder/Units.swift "fuzz/targets/$1.swift" -o "$OUT/$1" ;;
        disk_record)
            # CacheStorage imports CacheSemantics, HTTP1 and HTTPHeaders:
            # build those modules first,
            for m in HTTPHeaders CacheSemantics HTTP1; do module $m; done
            # the C targets it reaches (CChecksum; CEventLoop through Clocks
            # and Threads),
            cmodule CChecksum crc32c
            cmodule CEventLoop el
            module Clocks
            module Threads
            # and swift-system as SwiftPM builds it (not instrumented: it is
            # not what is fuzzed).
            swift build -c release --target SystemPackage >&2
            system=.build/release
            # shellcheck disable=SC2086
            swiftc $FLAGS -module-name CacheStorage -I "$OUT" -I "$OUT/CEventLoop" -I "$OUT/CChecksum" -I "$system/Modules" \
                -I .build/checkouts/swift-system/Sources/CSystem/include \
                Sources/CacheStorage/*.swift Sources/CacheStorage/Disk/*.swift "fuzz/targets/$1.swift" \
                "$OUT/HTTPHeaders.o" "$OUT/CacheSemantics.o" "$OUT/HTTP1.o" "$OUT/Clocks.o" "$OUT/Threads.o" "$OUT/crc32c.o" \
                "$OUT/el.o" "$system"/SystemPackage.build/*.o "$system"/CSystem.build/*.o -o "$OUT/$1" ;;
        *) echo "unknown target $1" >&2; exit 64 ;;
    esac
}

status=0
for target in $TARGETS; do
    echo "== $target: building" >&2
    build "$target" 2>&1 | grep -v "Cannot export local symbol" >&2 || true
    mkdir -p "$OUT/corpus/$target" "fuzz/corpus/$target"
    echo "== $target: fuzzing for ${SECONDS_PER}s" >&2
    if ! "$OUT/$target" -max_total_time="$SECONDS_PER" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
        -artifact_prefix="fuzz/crashes/$target-" "$OUT/corpus/$target" "fuzz/corpus/$target" 2> "$OUT/$target.log"; then
        echo "== $target: FAILED, see $OUT/$target.log and fuzz/crashes/" >&2
        tail -30 "$OUT/$target.log" >&2
        status=1
    else
        grep -E "^Done|stat::number_of_executed_units" "$OUT/$target.log" | tail -1 >&2
    fi
    if [ "${MERGE:-0}" = 1 ]; then
        "$OUT/$target" -merge=1 -max_len=65536 "fuzz/corpus/$target" "$OUT/corpus/$target" 2>> "$OUT/$target.log"
    fi
done
exit $status
