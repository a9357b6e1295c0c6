#!/bin/sh
# Where Larder's CPU goes: runs one workload against Larder (one worker on
# CPU 0, wrk on CPU 1) while `perf record` samples the Larder process, then
# prints the hottest symbols (self time) and the syscall counts per request.
#
#   bench/profile.sh [hot-1k|misses|disk-10k] [seconds]
#
# disk-10k: 10,000 keys of 1 KiB requested at random from a Larder whose
# memory tier is 2 MiB, so nearly every hit is read from the disk tier.
#
# Needs perf (linux-perf). Not a test: nothing here asserts a figure.
WORKLOAD=${1:-misses}
SECONDS_TO_RUN=${2:-10}
ORIGIN=none
. "$(dirname "$0")/common.sh"
command -v perf >/dev/null 2>&1 || { echo "perf is needed (apt-get install linux-perf)" >&2; exit 1; }

mkdir -p "$WORK/www"
head -c 1024 /dev/urandom > "$WORK/www/1k"
start_static_origin "location ~ ^/1k/ { add_header Cache-Control \"max-age=3600\"; try_files /1k =404; }"
if [ "$WORKLOAD" = disk-10k ]; then TIERS="--memory-limit 2MiB --cache-dir $WORK/cache"; else TIERS="--memory-limit 2GiB"; fi
# shellcheck disable=SC2086
LARDER_LAUNCH="taskset -c 0" WORKERS=1 start_larder $TIERS --admin-listen none --log-level error
PIDS="$PIDS $LARDER_PID"

write_misses_script "$WORK/misses.lua"
case $WORKLOAD in
    misses) target="/"; script="-s $WORK/misses.lua" ;;
    hot-1k) target="/1k/hot"; script=""; curl -s -o /dev/null "http://127.0.0.1:$LARDER_PORT$target" ;;
    disk-10k)
        target="/"; script="-s $WORK/random.lua"
        printf 'local n = 0\nrequest = function() n = n %% 10000 + 1; return wrk.format(nil, "/1k/key-" .. n) end\n' > "$WORK/fill.lua"
        printf 'request = function() return wrk.format(nil, "/1k/key-" .. math.random(1, 10000)) end\n' > "$WORK/random.lua"
        # Every key stored (twice round, so all are on disk), then random ones.
        taskset -c 1 wrk -t1 -c16 -d6s -s "$WORK/fill.lua" "http://127.0.0.1:$LARDER_PORT/" > /dev/null ;;
    *) echo "unknown workload $WORKLOAD" >&2; exit 64 ;;
esac

# Two phases: sampling first, then syscall counting (tracing every syscall
# slows the kernel side down, so it would distort the profile).
perf record -e cpu-clock -F 1999 -g -p "$LARDER_PID" -o "$WORK/perf.data" -- sleep "$SECONDS_TO_RUN" 2> /dev/null &
PERF_PID=$!
# shellcheck disable=SC2086
taskset -c 1 wrk -t1 -c64 -d"${SECONDS_TO_RUN}s" $script "http://127.0.0.1:$LARDER_PORT$target" > "$WORK/wrk.txt"
wait $PERF_PID 2> /dev/null || true
echo "$WORKLOAD: $(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.txt") requests/s"
echo "== where the time goes (by object)"
perf report -i "$WORK/perf.data" --no-children --sort dso --stdio 2> /dev/null | grep -E '^ +[0-9]' | head -8
echo "== hottest symbols (self)"
perf report -i "$WORK/perf.data" --no-children --sort symbol --stdio 2> /dev/null | grep -E '^ +[0-9]' | sed 's/  *- *- *$//' | head -"${TOP:-45}"
perf stat -e 'syscalls:sys_enter_*' -p "$LARDER_PID" -o "$WORK/syscalls.txt" -- sleep 3 2> /dev/null &
STAT_PID=$!
# shellcheck disable=SC2086
taskset -c 1 wrk -t1 -c64 -d3s $script "http://127.0.0.1:$LARDER_PORT$target" > "$WORK/wrk.txt"
wait $STAT_PID 2> /dev/null || true
requests=$(awk '/requests in/ {print $1}' "$WORK/wrk.txt")
echo "== syscalls per request"
awk -v n="$requests" '$2 ~ /syscalls:sys_enter_/ && $1 + 0 > 0 {gsub(",", "", $1); printf "%8.2f  %s\n", $1 / n, $2}' "$WORK/syscalls.txt" | sort -rn | head -15
