#!/bin/sh
# Lock acquisitions, hold and wait times per request, for each `Locked`
# call site on a workload's path: what limits hits on more cores, measured
# where there are few (the issue's stand-in for a many-core run).
#
#   bench/locks.sh [seconds_per_run]
#
# Builds Larder with -DLOCK_STATS (in .build-locks: each `Locked.withLock`
# times itself per call site; see Sources/CacheStorage/LockStats.swift) and
# runs, for each worker count in WORKER_COUNTS (default "1 2") and each of
# WORKLOADS (default "hot-1k random-10k disk-10k", as in bench/compare.sh),
# Larder twice: once only filling the cache, once filling it then serving
# wrk for the given seconds (64 connections). The table is the second run
# less the first: the served requests alone. Columns: acquisitions per
# request, the share of them that found the lock taken, mean wait and mean
# hold in nanoseconds (a hold includes one clock read, ~20 ns). Nothing is
# pinned: with as many workers as cores, wrk shares them, and a worker
# preempted while holding a lock shows as a longer hold. Not a test.
DURATION=${1:-5}
WORKER_COUNTS=${WORKER_COUNTS:-1 2}
WORKLOADS=${WORKLOADS:-hot-1k random-10k disk-10k}
ORIGIN=none
. "$(dirname "$0")/common.sh"
swift build -c release --static-swift-stdlib --product larder -Xswiftc -DLOCK_STATS --build-path .build-locks >&2
LOCKS_LARDER=.build-locks/release/larder

mkdir -p "$WORK/www"
head -c 1024 /dev/urandom > "$WORK/www/1k"
start_static_origin "location ~ ^/1k/ { add_header Cache-Control \"max-age=3600\"; try_files /1k =404; }"
write_keys_scripts "$WORK/random.lua" "$WORK/sequential.lua"
cat > "$WORK/fill.lua" <<'LUA'
local n = 0
request = function() n = n + 1; if n > 10000 then wrk.thread:stop() end; return wrk.format(nil, "/1k/key-" .. math.min(n, 10000)) end
LUA

# One Larder run: start, fill, serve for $2 seconds (0: none), stop;
# the lock table is left in $3, served requests in $3.requests.
larder_run() {  # workload seconds out
    cache=""; tiers="--memory-limit 2GiB"
    if [ "$1" = disk-10k ]; then cache="$WORK/cache-$$-$(date +%s%N)"; tiers="--memory-limit 2MiB --cache-dir $cache"; fi
    # shellcheck disable=SC2086
    LARDER_LOCK_STATS="$3" "$LOCKS_LARDER" serve --listen 127.0.0.1:0 --upstream "http://127.0.0.1:$ORIGIN_PORT" \
        --workers "$workers" $tiers --admin-listen none --log-level error 2> "$WORK/larder.err" &
    pid=$!
    i=0; while ! grep -qs "listening on" "$WORK/larder.err" && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done
    port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/larder.err")
    case $1 in
        hot-1k) curl -s -o /dev/null "http://127.0.0.1:$port/1k/hot"; path=/1k/hot; script="" ;;
        *) wrk -t1 -c1 -d60s -s "$WORK/fill.lua" "http://127.0.0.1:$port/" > /dev/null; path=/; script="-s $WORK/random.lua" ;;
    esac
    requests=0
    if [ "$2" -gt 0 ]; then
        # shellcheck disable=SC2086
        requests=$(wrk -t2 -c64 -d"$2s" $script "http://127.0.0.1:$port$path" | awk '/requests in/ {print $1}')
    fi
    echo "$requests" > "$3.requests"
    kill -TERM "$pid"
    i=0; while kill -0 "$pid" 2>/dev/null && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done
    [ -n "$cache" ] && rm -rf "$cache"
    [ -s "$3" ] || { echo "no lock table from $1 (did the build define LOCK_STATS?)" >&2; exit 1; }
}

for workers in $WORKER_COUNTS; do
    for workload in $WORKLOADS; do
        larder_run "$workload" 0 "$WORK/base"
        larder_run "$workload" "$DURATION" "$WORK/served"
        n=$(cat "$WORK/served.requests")
        echo
        echo "$workload, $workers worker(s): $n requests in ${DURATION}s"
        echo "| site | per request | contended | wait ns | hold ns |"
        echo "| --- | ---: | ---: | ---: | ---: |"
        awk -v n="$n" '
            FNR == 1 { next }
            FILENAME ~ /base$/ { a[$1] = $2; c[$1] = $3; w[$1] = $4; h[$1] = $5; next }
            {
                acq = $2 - a[$1]; if (acq <= 0 || acq / n < 0.001) next
                printf "| `%s` | %.3f | %.2f %% | %.0f | %.0f |\n", $1, acq / n, 100 * ($3 - c[$1]) / acq, ($4 - w[$1]) / acq, ($5 - h[$1]) / acq
            }' "$WORK/base" "$WORK/served" | sort -t'|' -k3 -rn
    done
done
